import sqlite3
from pathlib import Path
from typing import Any

import pytest

from taskq import errors
from taskq.broker.ops import maintenance, migrations, plan, queries
from taskq.broker.ops.jobs import execution_list
from taskq.broker.ops.maintenance import Pruner
from taskq.broker.ops.migrations import load_migrations, migrate, split_statements
from taskq.broker.ops.output import OutputReader
from taskq.broker.ops.queries import read_sql_file
from taskq.broker.ops.retention import retention_get
from taskq.broker.ops.workers import job_served_elsewhere
from taskq.broker.records import ClaimedJob, Lease, PayloadKind, Retention
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Statement


def _schema_of(path: Path) -> set[tuple[str, ...]]:
    """Tables by their columns, other objects by their SQL.

    A table grown by ALTER TABLE keeps its columns in a differently worded
    CREATE statement, so tables are compared column by column.
    """
    with sqlite3.connect(path) as conn:
        objects = conn.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' AND name != 'taskq_migrations'"
        ).fetchall()
        shape: set[tuple[str, ...]] = set()
        for kind, name, sql in objects:
            if kind == "table":
                for column in conn.execute(f"PRAGMA table_info({name})"):
                    shape.add((kind, name, *map(str, column)))
            else:
                shape.add((kind, name, " ".join(sql.split())))
    return shape


def test_migrations_produce_exactly_schema_sql(tmp_path: Path) -> None:
    migrated = tmp_path / "migrated.db"
    store = SqliteStore(migrated)
    migrate(store)
    store.close()
    direct = tmp_path / "direct.db"
    with sqlite3.connect(direct) as conn:
        for statement in split_statements(read_sql_file("schema.sql")):
            conn.execute(statement)
    assert _schema_of(migrated) == _schema_of(direct)
    assert _schema_of(migrated)


def test_migrate_is_applied_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "t.db")
    first = migrate(store)
    second = migrate(store)
    assert first == [m.version for m in load_migrations()]
    assert second == []
    store.close()


def test_store_newer_than_code_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "t.db")
    migrate(store)
    with sqlite3.connect(tmp_path / "t.db") as conn:
        conn.execute("INSERT INTO taskq_migrations VALUES (999, 'future', 0)")
    with pytest.raises(errors.MigrationError, match="newer than this taskq"):
        migrate(store)
    store.close()


def test_split_statements_keeps_semicolons_in_strings_and_triggers() -> None:
    script = """
    -- a comment; with a semicolon
    CREATE TABLE t (a TEXT DEFAULT 'x;y');
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN
        UPDATE t SET a = 'z'; DELETE FROM t WHERE a = ';';
    END;
    """
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[0].startswith("CREATE TABLE t")
    assert statements[1].endswith("END")


def test_unterminated_statement_is_an_error() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        split_statements("CREATE TABLE t (a)")


def test_migration_versions_have_no_gaps() -> None:
    versions = [m.version for m in migrations.load_migrations()]
    assert versions == list(range(1, len(versions) + 1))


def _store_at(path: Path, version: int) -> SqliteStore:
    """A store with the migrations up to ``version`` applied, as a release of then left it."""
    store = SqliteStore(path)
    store.execute([Statement(queries.query("migration_table_create"))])
    for migration in load_migrations()[:version]:
        assert migrations._apply(store, migration)
    return store


def test_the_workflows_migration_keeps_jobs_and_never_reuses_an_id(tmp_path: Path) -> None:
    """0009 builds the jobs table anew: rows, counts and the id sequence must survive it."""
    path = tmp_path / "old.db"
    store = _store_at(path, 8)
    with sqlite3.connect(path) as conn:
        for key in ("a", "b", "c"):
            conn.execute(
                "INSERT INTO jobs (queue, kind, payload, run_at, idempotency_key, created_at) "
                "VALUES ('q', 'call', '{}', 0, ?, 0)",
                (key,),
            )
        conn.execute("DELETE FROM jobs WHERE idempotency_key = 'c'")
    # 0009 and every later migration run, 0009 first.
    assert migrate(store) == [m.version for m in load_migrations()[8:]]
    store.close()
    with sqlite3.connect(path) as conn:
        kept = conn.execute("SELECT id, state, parents_left FROM jobs ORDER BY id").fetchall()
        assert kept == [(1, "queued", 0), (2, "queued", 0)]
        conn.execute(
            "INSERT INTO jobs (queue, kind, payload, run_at, idempotency_key, created_at) "
            "VALUES ('q', 'call', '{}', 0, 'd', 0)"
        )
        assert conn.execute("SELECT id FROM jobs WHERE idempotency_key = 'd'").fetchone() == (4,)
        counted = conn.execute("SELECT n FROM job_counts WHERE state = 'queued'").fetchone()
        assert counted == (3,), "the count triggers were not made again"


def test_a_store_at_0011_gains_inline_output_and_keeps_its_chunks(tmp_path: Path) -> None:
    """0012 adds executions.output_inline: attempts from before read from their chunks still."""
    path = tmp_path / "old.db"
    store = _store_at(path, 11)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO jobs (queue, kind, payload, state, run_at, created_at, attempts, "
            "idempotency_key) "
            "VALUES ('q', 'call', '{}', 'succeeded', 0, 0, 1, 'k')"
        )
        conn.execute(
            "INSERT INTO executions (job_id, attempt, worker_id, lease_token, started_at, "
            "finished_at, outcome, output_bytes) VALUES (1, 1, 'w', 't', 1, 2, 'succeeded', 4)"
        )
        conn.execute("INSERT INTO job_output VALUES (1, 0, 4, 'old\n')")
    assert migrate(store) == [12, 13, 14, 15, 16]
    [execution] = plan.run(store, execution_list(job_id=1))
    assert (execution.log_tail, execution.output_bytes) == ("old\n", 4)
    events = plan.run(store, OutputReader(1).next_page())
    assert [getattr(event, "text", None) for event in events] == ["old\n", None]
    [row] = store.query(Statement("SELECT output_inline FROM executions"))
    assert row["output_inline"] is None
    store.close()


def _insert_jobs(conn: sqlite3.Connection, jobs: list[tuple[str, str, int, int]]) -> None:
    """Jobs by (key, state, has_children, parents_left), their ids 1, 2... in that order."""
    conn.executemany(
        "INSERT INTO jobs (queue, kind, payload, run_at, idempotency_key, created_at, "
        "state, has_children, parents_left) VALUES ('q', 'call', '{}', 0, ?, 0, ?, ?, ?)",
        jobs,
    )


def _counters(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
    return conn.execute(
        "SELECT idempotency_key, parents_left, parents_failed FROM jobs "
        "WHERE idempotency_key LIKE 'c%' ORDER BY id"
    ).fetchall()


def test_the_counting_triggers_made_anew_count_on_from_where_the_old_ones_left(
    tmp_path: Path,
) -> None:
    """0013 replaces the parent-counting triggers: children counted half by each stay right.

    Two parents of three children each: every parent has more than one
    child, so the triggers for the first child and for the others both fire.
    """
    path = tmp_path / "old.db"
    store = _store_at(path, 12)
    with sqlite3.connect(path) as conn:
        _insert_jobs(
            conn,
            [
                ("p1", "running", 1, 0),
                ("p2", "running", 1, 0),
                ("c1", "waiting", 0, 2),
                ("c2", "waiting", 0, 2),
                ("c3", "waiting", 0, 2),
            ],
        )
        for child in (3, 4, 5):
            conn.executemany(
                "INSERT INTO job_parents (child_id, position, parent_id) VALUES (?, ?, ?)",
                [(child, 0, 1), (child, 1, 2)],
            )
        conn.execute("UPDATE jobs SET state = 'succeeded' WHERE idempotency_key = 'p1'")
        assert _counters(conn) == [("c1", 1, 0), ("c2", 1, 0), ("c3", 1, 0)]
    assert migrate(store) == [13, 14, 15, 16]
    store.close()
    with sqlite3.connect(path) as conn:
        # As the store's own statements do (0014), an end sets finished_at, a retry clears it.
        conn.execute("UPDATE jobs SET state = 'dead', finished_at = 1 WHERE idempotency_key = 'p2'")
        assert _counters(conn) == [("c1", 0, 1), ("c2", 0, 1), ("c3", 0, 1)]
        # Retried, the dead parent is waited for again; a child no longer waiting is not.
        conn.execute(
            "UPDATE jobs SET state = 'cancelled', finished_at = 1 WHERE idempotency_key = 'c3'"
        )
        conn.execute(
            "UPDATE jobs SET state = 'queued', finished_at = NULL WHERE idempotency_key = 'p2'"
        )
        assert _counters(conn) == [("c1", 1, 0), ("c2", 1, 0), ("c3", 0, 1)]


def test_after_0014_the_counting_triggers_follow_ends_not_every_change_of_state(
    tmp_path: Path,
) -> None:
    """0014 puts the parent-counting triggers on finished_at: a claim is prepared without them."""
    path = tmp_path / "old.db"
    store = _store_at(path, 13)
    assert migrate(store) == [14, 15, 16]
    store.close()
    with sqlite3.connect(path) as conn:
        _insert_jobs(conn, [("p1", "queued", 1, 0), ("c1", "waiting", 0, 1)])
        conn.execute("INSERT INTO job_parents (child_id, position, parent_id) VALUES (2, 0, 1)")
        claim = "UPDATE jobs SET state = 'running' WHERE idempotency_key = 'p1'"
        programs = [row[1] for row in conn.execute(f"EXPLAIN {claim}")]
        conn.execute(claim)
        # The end: the parent's counting trigger fires.
        conn.execute(
            "UPDATE jobs SET state = 'succeeded', finished_at = 1 WHERE idempotency_key = 'p1'"
        )
        assert _counters(conn) == [("c1", 0, 0)]
    # The claim's program carries the count trigger alone (one sub-program), not the four
    # parent-counting ones as well.
    assert programs.count("Program") == 1


def test_after_0015_a_store_prunes_as_before_until_its_retention_is_set(tmp_path: Path) -> None:
    """0015 keeps the retention in the store: seven days of each kind, as maintenance pruned."""
    path = tmp_path / "old.db"
    store = _store_at(path, 14)
    with sqlite3.connect(path) as conn:
        _insert_jobs(conn, [("old", "dead", 0, 0), ("new", "succeeded", 0, 0)])
        conn.execute("UPDATE jobs SET finished_at = 1000 WHERE idempotency_key = 'old'")
        conn.execute("UPDATE jobs SET finished_at = 1000 + 6 * 86400 WHERE idempotency_key = 'new'")
    assert migrate(store) == [15, 16]
    assert plan.run(store, retention_get()) == Retention(7 * 86400.0, 7 * 86400.0)
    assert maintenance.run_once(store, Pruner(), now=1000 + 8 * 86400) == {"pruned": 1}
    [row] = store.query(Statement("SELECT idempotency_key FROM jobs"))
    assert row["idempotency_key"] == "new"
    store.close()


def test_after_0016_a_worker_registered_before_serves_what_it_declares(tmp_path: Path) -> None:
    """0016 records each worker's policy; a worker of before has none, and counts, for a job
    another worker refused, by the functions it declares, as it did then."""
    path = tmp_path / "old.db"
    store = _store_at(path, 15)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE taskq_clock SET now = 1000")
        conn.execute(
            "INSERT INTO workers (id, name, host, pid, queues, slots, started_at, heartbeat_at) "
            """VALUES ('older', 'older', 'h', 1, '["q"]', 1, 1000, 1000)"""
        )
        conn.execute(
            "INSERT INTO function_servers (worker_id, name, fingerprint) "
            "VALUES ('older', 'pkg.tasks:resize', 'f')"
        )
    assert migrate(store) == [16]

    def served(kind: PayloadKind, payload: dict[str, Any]) -> bool:
        job = ClaimedJob(Lease(1, "t"), kind, payload, "q", 1, 1, None, {}, 0.0)
        return plan.run(store, job_served_elsewhere(job, worker_id="asking"))

    assert served(PayloadKind.CALL, {"target": "pkg.tasks:resize"})
    assert not served(PayloadKind.CALL, {"target": "pkg.tasks:crop"})
    assert not served(PayloadKind.SHELL, {"argv": ["true"]})
    store.close()
