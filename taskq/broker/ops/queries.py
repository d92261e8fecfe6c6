"""Named SQL blocks, loaded once from the package's ``sql/queries/`` files.

A file holds blocks each headed by a line ``-- name: block_name``; a block
runs until the next header, and its comment lines are dropped. There is one
file per module that speaks to the store (``enqueue.sql`` for
``ops/enqueue.py``, ...), and a name is unique across all of them, so a
lookup needs only the name. Lookups of unknown names fail loudly, and a test
checks every name the code uses exists.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_QUERY_FOLDER = "queries"
# The package's own files, read by path: ``importlib.resources`` would import
# tempfile, shutil and the compression modules into every process that opens
# a store (about 3.5 ms of a worker's or a command's start).
SQL_FOLDER = Path(__file__).with_name("sql")


def parse_blocks(text: str) -> dict[str, str]:
    """Split ``text`` into ``{name: sql}`` by its ``-- name:`` headers."""
    blocks: dict[str, str] = {}
    headers = list(_HEADER.finditer(text))
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        end = following.start() if following else len(text)
        name = header.group(1)
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        # Comment lines document the file; they are not sent to the store.
        lines = text[header.end() : end].splitlines()
        body = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        blocks[name] = body.strip().rstrip(";").strip()
    return blocks


def read_sql_file(name: str) -> str:
    return (SQL_FOLDER / name).read_text(encoding="utf-8")


@functools.cache
def all_queries() -> dict[str, str]:
    """Every named block of every query file; a name in two files is an error."""
    found: dict[str, str] = {}
    where: dict[str, str] = {}
    files = SQL_FOLDER / _QUERY_FOLDER
    for entry in sorted(files.iterdir(), key=lambda entry: entry.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, sql in parse_blocks(entry.read_text(encoding="utf-8")).items():
            if name in found:
                raise ValueError(f"SQL block {name!r} is in {where[name]} and in {entry.name}")
            found[name], where[name] = sql, entry.name
    return found


def query(name: str) -> str:
    """The SQL text of the block ``name``, in whichever query file holds it."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no SQL block named {name!r} in sql/{_QUERY_FOLDER}/") from None
