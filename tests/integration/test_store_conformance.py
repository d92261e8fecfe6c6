"""One suite, run unchanged against the SQLite file and a real 3-node rqlite cluster."""

from __future__ import annotations

import anyio
import pytest

from taskq import errors
from taskq.broker.stores.store import Consistency, Statement, Store


def _create(store: Store, table: str) -> None:
    store.execute(
        [
            Statement(
                f"CREATE TABLE {table} "
                "(id INTEGER PRIMARY KEY, name TEXT UNIQUE, score REAL, note TEXT)"
            )
        ]
    )


def test_insert_reports_rows_and_id(store: Store, table: str) -> None:
    _create(store, table)
    [result] = store.execute(
        [
            Statement(
                f"INSERT INTO {table} (name, score) VALUES (:name, :score)",
                {"name": "a", "score": 1.5},
            )
        ]
    )
    assert result.rows_affected == 1
    assert result.last_insert_id == 1


def test_values_round_trip(store: Store, table: str) -> None:
    _create(store, table)
    note = "quotes ' \" ; -- and ünïcode ✓"
    store.execute(
        [
            Statement(
                f"INSERT INTO {table} (id, name, score, note) VALUES (:id, :name, :score, :note)",
                {"id": 2**40, "name": "big", "score": None, "note": note},
            )
        ]
    )
    rows = store.query(Statement(f"SELECT id, name, score, note FROM {table}"))
    assert rows == [{"id": 2**40, "name": "big", "score": None, "note": note}]


def test_batch_is_atomic_and_names_the_failing_statement(store: Store, table: str) -> None:
    _create(store, table)
    insert = f"INSERT INTO {table} (name) VALUES (:name)"
    with pytest.raises(errors.ConstraintViolation) as caught:
        store.execute([Statement(insert, {"name": "x"}), Statement(insert, {"name": "x"})])
    assert caught.value.index == 1
    assert store.query(Statement(f"SELECT count(*) AS n FROM {table}"))[0]["n"] == 0


def test_syntax_error_is_a_statement_error_not_a_constraint(store: Store, table: str) -> None:
    _create(store, table)
    with pytest.raises(errors.StatementError) as caught:
        store.execute(
            [
                Statement(f"INSERT INTO {table} (name) VALUES ('ok')"),
                Statement(f"INSERT INTO {table} (nme) VALUES ('bad')"),
            ]
        )
    assert not isinstance(caught.value, errors.ConstraintViolation)
    assert caught.value.index == 1
    assert store.query(Statement(f"SELECT count(*) AS n FROM {table}"))[0]["n"] == 0


def test_returning_gives_rows_within_a_batch(store: Store, table: str) -> None:
    _create(store, table)
    results = store.execute(
        [
            Statement(f"INSERT INTO {table} (name, score) VALUES ('a', 1), ('b', 2), ('c', 3)"),
            Statement(
                f"UPDATE {table} SET score = score * 10 WHERE score >= :low RETURNING name, score",
                {"low": 2},
            ),
        ]
    )
    assert sorted((row["name"], row["score"]) for row in results[1].rows) == [("b", 20), ("c", 30)]


def test_insert_on_conflict_do_nothing_returning(store: Store, table: str) -> None:
    _create(store, table)
    upsert = f"INSERT INTO {table} (name) VALUES (:name) ON CONFLICT (name) DO NOTHING RETURNING id"
    first = store.execute([Statement(upsert, {"name": "k"})])[0].rows
    second = store.execute([Statement(upsert, {"name": "k"})])[0].rows
    assert len(first) == 1
    assert second == []


@pytest.mark.parametrize("consistency", list(Consistency))
def test_reads_at_every_consistency(store: Store, table: str, consistency: Consistency) -> None:
    _create(store, table)
    store.execute([Statement(f"INSERT INTO {table} (name) VALUES ('seen')")])
    rows = store.query(
        Statement(f"SELECT name FROM {table} WHERE name = :name", {"name": "seen"}),
        consistency=consistency,
    )
    # A read at NONE may lag on a follower; the leader-first client reads the leader.
    assert rows == [{"name": "seen"}]


def test_empty_result_is_an_empty_list(store: Store, table: str) -> None:
    _create(store, table)
    assert store.query(Statement(f"SELECT * FROM {table}")) == []


def test_async_entry_points_share_the_behaviour(store: Store, table: str) -> None:
    async def scenario() -> None:
        await store.execute_async([Statement(f"CREATE TABLE {table} (name TEXT UNIQUE)")])
        await store.execute_async([Statement(f"INSERT INTO {table} VALUES ('a')")])
        with pytest.raises(errors.ConstraintViolation):
            await store.execute_async([Statement(f"INSERT INTO {table} VALUES ('a')")])
        rows = await store.query_async(Statement(f"SELECT name FROM {table}"))
        assert rows == [{"name": "a"}]
        await store.aclose()

    anyio.run(scenario)


def test_store_time_is_written_as_one_value(store: Store, table: str) -> None:
    store.execute([Statement(f"CREATE TABLE {table} (a REAL, b REAL)")])
    now = "(julianday('now') - 2440587.5) * 86400.0"
    store.execute([Statement(f"INSERT INTO {table} (a, b) VALUES ({now}, {now})")])
    [row] = store.query(
        Statement(f"SELECT a, b FROM {table}"), consistency=Consistency.LINEARIZABLE
    )
    assert row["a"] == pytest.approx(row["b"], abs=0.2)
    assert row["a"] > 1.7e9


def test_schema_is_migrated(store: Store) -> None:
    rows = store.query(Statement("SELECT max(version) AS v FROM taskq_migrations"))
    assert rows[0]["v"] >= 1


def test_nodes_name_one_leader(store: Store) -> None:
    nodes = store.nodes()
    assert [node.leader for node in nodes].count(True) == 1
    assert all(node.reachable for node in nodes)
