"""Named SQL blocks, loaded once from the package's ``sql/`` files.

A file holds blocks each headed by a line ``-- name: block_name``; a block
runs until the next header, and its comment lines are dropped. Lookups of
unknown names fail loudly, and a test checks every name the code uses exists.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
    return (resources.files("taskq.broker") / "sql" / name).read_text(encoding="utf-8")


@functools.cache
def all_queries() -> dict[str, str]:
    return parse_blocks(read_sql_file("queries.sql"))


def query(name: str) -> str:
    """The SQL text of the block ``name`` in ``queries.sql``."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no SQL block named {name!r} in queries.sql") from None
