"""The SQL the rqlite store sends: its statements without their indentation, meaning the same."""

from __future__ import annotations

import pytest

from taskq.broker.ops import queries
from taskq.broker.stores.rqlite_protocol import compact_sql, statements_body
from taskq.broker.stores.store import Statement


def test_spaces_and_comments_outside_quotes_become_one_space() -> None:
    sql = "SELECT a,\n       b -- why\n  FROM t /* a\n block */ WHERE  c = :c\n"
    assert compact_sql(sql) == "SELECT a, b FROM t WHERE c = :c"


@pytest.mark.parametrize(
    "quoted",
    [
        "'a  b -- not a comment'",
        "'it''s\n  two  lines'",
        '"col  name"',
        "`col  name`",
        "[col  name]",
    ],
)
def test_what_is_quoted_is_kept_as_it_is(quoted: str) -> None:
    assert compact_sql(f"SELECT  {quoted}  FROM t") == f"SELECT {quoted} FROM t"


@pytest.mark.parametrize("name", sorted(queries.all_queries()))
def test_every_query_keeps_its_tokens_and_what_rqlite_looks_for(name: str) -> None:
    """No token is joined or split, and rqlite's text checks find the same things.

    rqlite decides from the text whether a statement returns rows (``returning
    ``) and which time functions to rewrite on the leader (``julianday(`` and
    the like).
    """
    sql = queries.query(name)
    compacted = compact_sql(sql)
    assert compacted.split() == sql.split()
    for marker in ("returning ", "julianday(", "datetime(", "unixepoch(", "random("):
        assert compacted.lower().count(marker) == sql.lower().count(marker), marker


def test_the_body_sends_compacted_sql_with_its_parameters() -> None:
    body = statements_body(
        [Statement("SELECT\n    :a", {"a": 1}), Statement("UPDATE t\nSET x = 1")]
    )
    assert body == [["SELECT :a", {"a": 1}], ["UPDATE t SET x = 1"]]
