"""Schema versions across an upgrade, on both stores (docs/upgrades.md).

A store from the previous release is brought up to date by the first
process of this one, its jobs intact and runnable; processes starting
together apply each migration once; and a store newer than this taskq is
refused by the client, the command and the worker, each in one line that
names both versions.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations, queries
from taskq.broker.stores.store import Consistency, Statement, Store
from tests.support import cli_runs
from tests.support.cli_runs import one_error_line
from tests.support.fresh_stores import fresh_store
from tests.support.rqlite_cluster import STORE_KINDS
from tests.support.worker_process import WorkerFleet, wait_until

pytestmark = pytest.mark.timeout(180)

NEWEST = len(migrations.load_migrations())
PREVIOUS = NEWEST - 1
WAIT = 60
RACERS = 4


@pytest.fixture(params=STORE_KINDS)
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store that holds nothing yet."""
    with fresh_store(str(request.param), tmp_path / "store") as url:
        yield url


def _open(url: str) -> Store:
    return open_store(url, migrate=False)


def _rows(url: str, sql: str) -> list[dict[str, Any]]:
    store = _open(url)
    try:
        return store.query(Statement(sql), consistency=Consistency.LINEARIZABLE)
    finally:
        store.close()


def _versions(url: str) -> list[int]:
    return [row["version"] for row in _rows(url, "SELECT version FROM taskq_migrations")]


# -- a store newer than this taskq --------------------------------------------------------------


def test_a_store_newer_than_this_taskq_is_refused_in_one_line_naming_both_versions(
    fresh: str, tmp_path: Path
) -> None:
    store = open_store(fresh)
    store.execute([Statement("INSERT INTO taskq_migrations VALUES (:v, 'future', 0)", {"v": 99})])
    store.close()
    versions = f"schema version 99, newer than this taskq knows ({NEWEST})"
    with pytest.raises(errors.SchemaNewer, match=versions.replace("(", r"\(").replace(")", r"\)")):
        taskq.Client(fresh)
    one_error_line(cli_runs.taskq("jobs", store=fresh), 1, versions)
    one_error_line(cli_runs.taskq("submit", "--unchecked", "m:f", store=fresh), 1, versions)
    with WorkerFleet(tmp_path / "workers") as fleet:
        worker = fleet.start(fresh, wait_started=False)
        assert worker.wait(WAIT) != 0, worker.describe()
        lines = [line for line in worker.log_text().splitlines() if line.strip()]
        assert len(lines) == 1, worker.describe()
        assert lines[0].startswith("taskq-worker: error: "), worker.describe()
        assert versions in lines[0], worker.describe()
    assert sorted(_versions(fresh)) == [*range(1, NEWEST + 1), 99], "nothing was changed"


# -- processes that start together ---------------------------------------------------------------


def _migrate_in_child(
    url: str,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue[list[int] | str],
) -> None:
    barrier.wait(timeout=60)
    try:
        store = open_store(url, migrate=False)
        try:
            out.put(migrations.migrate(store))
        finally:
            store.close()
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_processes_starting_together_apply_each_migration_exactly_once(
    fresh: str, tmp_path: Path
) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(RACERS)
    out: multiprocessing.Queue[list[int] | str] = context.Queue()
    racers = [
        context.Process(target=_migrate_in_child, args=(fresh, barrier, out)) for _ in range(RACERS)
    ]
    for racer in racers:
        racer.start()
    try:
        applied = [out.get(timeout=WAIT) for _ in racers]
    finally:
        for racer in racers:
            racer.join(timeout=WAIT)
            if racer.is_alive():
                racer.kill()
    assert not [result for result in applied if isinstance(result, str)], applied
    every = sorted(version for result in applied if isinstance(result, list) for version in result)
    assert every == list(range(1, NEWEST + 1))
    assert all(racer.exitcode == 0 for racer in racers)
    assert sorted(_versions(fresh)) == list(range(1, NEWEST + 1))
    # Every table, index and trigger is there, as on a store migrated alone.
    alone = tmp_path / "alone.db"
    open_store(f"sqlite://{alone}").close()
    with sqlite3.connect(alone) as conn:
        expected = set(conn.execute("SELECT type, name FROM sqlite_master").fetchall())
    conn.close()
    objects = _rows(fresh, "SELECT type, name FROM sqlite_master")
    assert {(row["type"], row["name"]) for row in objects} == expected


# -- a store of the previous release --------------------------------------------------------------

_PREVIOUS_JOBS = {
    # idempotency key: (state, attempts, lease_until, result)
    "queued": ("queued", 0, None, None),
    "running": ("running", 1, 1.0, None),  # its worker is gone: the lease ran out long ago
    "succeeded": ("succeeded", 1, None, "5"),
    "failed": ("failed", 1, None, None),
    "dead": ("dead", 3, None, None),
    "cancelled": ("cancelled", 0, None, None),
}


def _store_at_previous_schema(url: str) -> None:
    """Migrations up to the previous release's newest only, then jobs written as it wrote them."""
    store = _open(url)
    try:
        store.execute([Statement(queries.query("migration_table_create"))])
        for migration in migrations.load_migrations()[:PREVIOUS]:
            assert migrations._apply(store, migration)
        for key, (state, attempts, lease_until, result) in _PREVIOUS_JOBS.items():
            payload = {"target": "tests.support.jobs:add", "args": [2, 3], "kwargs": {}}
            store.execute(
                [
                    Statement(
                        "INSERT INTO jobs (queue, kind, payload, state, run_at, attempts, "
                        "idempotency_key, created_at, worker_id, lease_token, lease_until, "
                        "result) VALUES ('old', 'call', :payload, :state, 0, :attempts, :key, 0, "
                        ":worker, :token, :lease_until, :result)",
                        {
                            "payload": json.dumps(payload),
                            "state": state,
                            "attempts": attempts,
                            "key": key,
                            "worker": "gone" if lease_until else None,
                            "token": f"token-{key}" if lease_until else None,
                            "lease_until": lease_until,
                            "result": result,
                        },
                    )
                ]
            )
        store.execute(
            [
                Statement(
                    "INSERT INTO executions (job_id, attempt, worker_id, lease_token, started_at, "
                    "finished_at, outcome, log_tail) SELECT id, 1, 'gone', 'done-' || id, 1, 2, "
                    "'succeeded', 'old tail' FROM jobs WHERE idempotency_key = 'succeeded'"
                ),
                # An attempt whose output the previous release stored in job_output.
                Statement(
                    "INSERT INTO executions (job_id, attempt, worker_id, lease_token, "
                    "started_at, finished_at, outcome, output_bytes) SELECT id, 1, 'gone', "
                    "'printed-' || id, 1, 2, 'error', 9 FROM jobs WHERE idempotency_key = 'failed'"
                ),
                Statement(
                    "INSERT INTO job_output SELECT id, 0, 9, 'old line\n' FROM executions "
                    "WHERE lease_token LIKE 'printed-%'"
                ),
            ]
        )
    finally:
        store.close()


def test_a_store_of_the_previous_release_is_migrated_with_its_jobs_intact_and_runnable(
    fresh: str, tmp_path: Path
) -> None:
    _store_at_previous_schema(fresh)
    assert sorted(_versions(fresh)) == list(range(1, PREVIOUS + 1))
    with taskq.Client(fresh) as client:  # the current code: it migrates as it opens
        assert sorted(_versions(fresh)) == list(range(1, NEWEST + 1))
        ids = {row["idempotency_key"]: row["id"] for row in _rows(fresh, "SELECT * FROM jobs")}
        states = {key: client.get(ids[key]).state.value for key in _PREVIOUS_JOBS}
        assert states == {key: state for key, (state, *_) in _PREVIOUS_JOBS.items()}
        done = client.get(ids["succeeded"])
        assert done.result == 5
        [attempt] = client.executions(ids["succeeded"])
        assert attempt.log_tail == "old tail"
        [printed] = client.executions(ids["failed"])
        assert printed.log_tail == "old line\n"  # read from its chunks, as before
        texts = [getattr(piece, "text", None) for piece in client.output(ids["failed"])]
        assert texts == ["old line\n", None]
        # A worker of this release runs what was left to run: the queued job, and
        # the running one once its lapsed lease is requeued.
        with WorkerFleet(tmp_path / "workers") as fleet:
            fleet.start(fresh, worker={"queues": ["old"]})
            runnable = [ids["queued"], ids["running"]]

            def ran() -> bool:
                return all(client.get(job_id).state.value == "succeeded" for job_id in runnable)

            assert wait_until(ran, WAIT), [client.get(job_id) for job_id in runnable]
            assert [client.get(job_id).result for job_id in runnable] == [5, 5]
    kept = {
        (r["queue"], r["state"]): r["n"]
        for r in _rows(fresh, "SELECT * FROM job_counts WHERE n != 0")
    }
    counted = _rows(fresh, "SELECT queue, state, count(*) AS n FROM jobs GROUP BY 1, 2")
    assert kept == {(r["queue"], r["state"]): r["n"] for r in counted}


def test_the_worker_that_migrates_the_store_says_so_and_the_next_says_nothing(
    fresh: str, tmp_path: Path
) -> None:
    _store_at_previous_schema(fresh)
    with WorkerFleet(tmp_path / "workers") as fleet:
        first = fleet.start(fresh, tag="first", worker={"queues": ["old"]})
        [migrated] = first.events("store_migrated")
        assert (migrated["schema"], migrated["applied"]) == (NEWEST, str(NEWEST))
        second = fleet.start(fresh, tag="second", worker={"queues": ["old"]})
        assert second.events("worker_started")
        assert not second.events("store_migrated")
