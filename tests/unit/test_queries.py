import re
from pathlib import Path

import pytest

from taskq.broker.ops import queries

PACKAGE = Path(__file__).resolve().parents[2] / "taskq"


def test_parse_blocks_splits_on_headers() -> None:
    blocks = queries.parse_blocks(
        "-- intro\n-- name: a\n-- why a\nSELECT 1;\n\n-- about b\n-- name: b_2\nSELECT\n  2\n"
    )
    assert blocks == {"a": "SELECT 1", "b_2": "SELECT\n  2"}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        queries.parse_blocks("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")


def test_unknown_name_fails_loudly() -> None:
    with pytest.raises(KeyError, match="no SQL block named 'nope'"):
        queries.query("nope")


def test_every_name_the_code_uses_exists() -> None:
    used: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        text = source.read_text()
        used |= set(re.findall(r"queries\.query\(\s*\"([a-z0-9_]+)\"", text))
        used |= set(re.findall(r"job_insert_sql\(\s*\"([a-z0-9_]+)\"", text))
    assert used, "expected the package to look up named queries"
    missing = used - set(queries.all_queries())
    assert not missing


def test_each_query_file_serves_one_module_and_every_block_is_used() -> None:
    # ops/x.py, and only it, looks up the blocks of sql/queries/x.sql: no exceptions.
    ops = PACKAGE / "broker" / "ops"
    files = sorted((ops / "sql" / "queries").glob("*.sql"))
    assert files
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py")}
    for sql_file in files:
        owner = ops / f"{sql_file.stem}.py"
        for name in queries.parse_blocks(sql_file.read_text()):
            users = {path for path, text in sources.items() if f'"{name}"' in text}
            assert users == {owner}, (sql_file.name, name, users)
