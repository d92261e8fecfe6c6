"""``taskq backup`` and ``taskq restore`` as a user runs them, on both stores.

The source is a store with data (a file of the test's own, or the session's
cluster); the target of a restore is a store that holds nothing (a new file,
or a cluster started for the test). Restored stores are read with plain SQL,
so what is checked does not lean on the code under test.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Consistency, Statement
from tests.support import cli_runs
from tests.support.cli_runs import one_error_line
from tests.support.fresh_stores import fresh_cluster, fresh_store
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster, RqliteNode
from tests.support.worker_process import WorkerFleet, wait_until

pytestmark = pytest.mark.timeout(180)

WAIT = 60
SLEEP_JOB = "tests.support.jobs:sleep"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def source(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store with data in it: a file of this test's own, or the session's cluster."""
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'source.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url


@pytest.fixture
def target(kind: str, tmp_path: Path) -> Iterator[str]:
    """An empty store to restore into."""
    with fresh_store(kind, tmp_path / "target") as url:
        yield url


@pytest.fixture
def queue() -> str:
    """A queue no other test uses, so the shared cluster's other jobs stay out of the counts."""
    return f"backup_{uuid.uuid4().hex[:10]}"


def _rows(url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    store = open_store(url, migrate=False)
    try:
        return store.query(Statement(sql, params), consistency=Consistency.LINEARIZABLE)
    finally:
        store.close()


def _jobs(url: str, queue: str) -> list[tuple[Any, ...]]:
    rows = _rows(
        url,
        "SELECT id, state, payload, attempts FROM jobs WHERE queue = :queue ORDER BY id",
        queue=queue,
    )
    return [(row["id"], row["state"], row["payload"], row["attempts"]) for row in rows]


def _states(url: str, queue: str) -> dict[str, int]:
    rows = _rows(
        url,
        "SELECT state, count(*) AS n FROM jobs WHERE queue = :queue GROUP BY state",
        queue=queue,
    )
    return {row["state"]: row["n"] for row in rows}


def _events(ran: cli_runs.Ran) -> list[dict[str, Any]]:
    assert ran.code == 0, ran
    return [json.loads(line) for line in ran.out.splitlines()]


def _tables(url: str) -> list[str]:
    rows = _rows(url, "SELECT name FROM sqlite_master WHERE type = 'table'")
    return [row["name"] for row in rows]


def _assert_consistent(url: str) -> None:
    """Whole-file integrity, and the trigger-kept counts agree with the jobs themselves."""
    assert _rows(url, "PRAGMA integrity_check") == [{"integrity_check": "ok"}]
    kept = {
        (row["queue"], row["state"]): row["n"]
        for row in _rows(url, "SELECT queue, state, n FROM job_counts WHERE n != 0")
    }
    counted = {
        (row["queue"], row["state"]): row["n"]
        for row in _rows(url, "SELECT queue, state, count(*) AS n FROM jobs GROUP BY 1, 2")
    }
    assert kept == counted


def test_a_backup_restores_into_a_new_store_with_every_job(
    kind: str, source: str, queue: str, tmp_path: Path
) -> None:
    with taskq.Client(source) as client:
        kept = [client.submit(SLEEP_JOB, 0, queue=queue, unchecked=True) for _ in range(3)]
        dropped = client.submit(SLEEP_JOB, 0, queue=queue, unchecked=True)
        client.cancel(dropped.id)
    backup = tmp_path / "taskq.backup"
    backed = _events(cli_runs.ok("backup", str(backup), "--json", store=source))
    assert backed[0]["event"] == "backup_started"
    assert backed[-1]["event"] == "backup_done"
    assert backed[-1]["file"] == str(backup)
    assert backup.stat().st_size == backed[-1]["bytes"]
    # A cluster of three: the load goes through the Raft log to every node.
    with fresh_cluster(kind, tmp_path / "target", nodes=3) as cluster:
        target = f"sqlite://{tmp_path / 'restored.db'}" if cluster is None else cluster.url
        restored = _events(cli_runs.ok("restore", str(backup), "--json", store=target))
        assert restored[0] == {"event": "restore_started", "file": str(backup), "store": target}
        assert restored[-1]["event"] == "restore_done"
        assert restored[-1]["jobs"] == backed[-1]["jobs"]
        assert _jobs(target, queue) == _jobs(source, queue)
        assert _states(target, queue) == {"queued": 3, "cancelled": 1}
        _assert_consistent(target)
        with taskq.Client(target) as client:
            assert [client.get(handle.id).state for handle in kept] == ["queued"] * 3
        if cluster is not None:
            counted = f"SELECT count(*) AS n FROM jobs WHERE queue = '{queue}'"
            for node in cluster.nodes:

                def took_the_load(node: RqliteNode = node) -> bool:
                    return cluster.local_rows(node, counted) == [{"n": 4}]

                assert wait_until(took_the_load, WAIT), f"{node.base_url} did not take the load"


def test_a_backup_taken_during_a_drain_restores_one_consistent_moment(
    source: str, target: str, queue: str, tmp_path: Path
) -> None:
    submitted = 120
    with taskq.Client(source) as client:
        for _ in range(submitted):
            client.submit(SLEEP_JOB, 0.02, queue=queue, unchecked=True)
    backup = tmp_path / "drain.backup"
    with WorkerFleet(tmp_path / "workers") as fleet:
        fleet.start(source, worker={"queues": [queue], "concurrency": 2})
        assert wait_until(lambda: _states(source, queue).get("succeeded", 0) >= 10, WAIT)
        backed = _events(cli_runs.ok("backup", str(backup), "--json", store=source))
    at_backup = backed[-1]
    restored = _events(cli_runs.ok("restore", str(backup), "--json", store=target))
    assert restored[-1]["jobs_by_state"] == at_backup["jobs_by_state"]
    _assert_consistent(target)
    # The worker that was live in the source is lost in the restored store, where it never
    # ran: no queue there counts as served by it until a worker is heard.
    [checked] = [event for event in restored if event["event"] == "restore_checked"]
    # (A cluster's source is shared: other tests' workers, some lost already, are there too.)
    assert 1 <= checked["workers_lost"] <= at_backup["workers"]
    live = "SELECT count(*) AS n FROM workers WHERE state IN ('active', 'draining')"
    assert _rows(target, live) == [{"n": 0}]
    states = _states(target, queue)
    assert sum(states.values()) == submitted
    assert states.get("succeeded", 0) >= 10
    # The restored store is a working one: its jobs run to the end on it.
    with WorkerFleet(tmp_path / "restored-workers") as fleet:
        fleet.start(target, worker={"queues": [queue], "concurrency": 2})
        assert wait_until(lambda: _states(target, queue) == {"succeeded": submitted}, WAIT), (
            _states(target, queue)
        )


def test_a_restore_over_a_store_with_data_is_refused_and_changes_nothing(
    source: str, queue: str, tmp_path: Path
) -> None:
    with taskq.Client(source) as client:
        client.submit(SLEEP_JOB, 0, queue=queue, unchecked=True)
    backup = tmp_path / "taskq.backup"
    cli_runs.ok("backup", str(backup), store=source)
    with taskq.Client(source) as client:
        client.submit(SLEEP_JOB, 1, queue=queue, unchecked=True)
    before = _jobs(source, queue)
    ran = cli_runs.taskq("restore", str(backup), store=source)
    if source.startswith("sqlite://"):
        one_error_line(ran, 1, "exists: a restore makes a new file", "nothing was changed")
    else:
        one_error_line(ran, 1, "already holds a taskq store", "nothing was changed")
    assert ran.out == "", "the store is checked before the restore says it starts"
    assert len(before) == 2
    assert _jobs(source, queue) == before


def test_a_store_with_only_workers_registered_is_refused_too(
    kind: str, target: str, tmp_path: Path
) -> None:
    with taskq.Client(f"sqlite://{tmp_path / 'small.db'}") as client:
        client.submit(SLEEP_JOB, 0, unchecked=True)
    backup = tmp_path / "small.backup"
    cli_runs.ok("backup", str(backup), store=f"sqlite://{tmp_path / 'small.db'}")
    with WorkerFleet(tmp_path / "workers") as fleet:
        fleet.start(target, worker={"queues": ["elsewhere"]})
        ran = cli_runs.taskq("restore", str(backup), store=target)
    if kind == "sqlite":
        one_error_line(ran, 1, "exists: a restore makes a new file")
    else:
        one_error_line(ran, 1, "already holds a taskq store", "1 worker(s) registered")
    assert _rows(target, "SELECT count(*) AS n FROM jobs") == [{"n": 0}]


def _not_a_store(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 10)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    conn.close()
    truncated = tmp_path / "truncated.backup"
    truncated.write_bytes(b"SQLite format 3\x00" + b"\x10\x00" + b"\x00" * 200)
    return {
        "text": (text, "is not a SQLite database"),
        "other": (other, "is a SQLite database but not a taskq store"),
        "truncated": (truncated, "truncated.backup"),
        "missing": (tmp_path / "nowhere.backup", "no such file"),
    }


def test_a_file_that_is_not_a_taskq_backup_is_refused_and_nothing_is_written(
    target: str, tmp_path: Path
) -> None:
    for name, (path, says) in _not_a_store(tmp_path).items():
        ran = cli_runs.taskq("restore", str(path), store=target)
        line = one_error_line(ran, 1, says)
        assert name == "truncated" or str(path) in line
    assert not target.startswith("sqlite://") or not Path(target[len("sqlite://") :]).exists()
    if not target.startswith("sqlite://"):
        assert _tables(target) == []


def _migrated_by_a_newer_taskq(store_file: Path) -> Path:
    """A store at ``store_file`` whose schema a taskq newer than this one moved (version 999)."""
    with taskq.Client(f"sqlite://{store_file}"):
        pass
    with sqlite3.connect(store_file) as conn:
        conn.execute("INSERT INTO taskq_migrations VALUES (999, 'future', 0)")
    conn.close()
    return store_file


def test_a_backup_newer_than_this_taskq_is_refused(target: str, tmp_path: Path) -> None:
    store_file = _migrated_by_a_newer_taskq(tmp_path / "future.db")
    ran = cli_runs.taskq("restore", str(store_file), store=target)
    one_error_line(ran, 1, "schema version 999, newer than this taskq knows")
    if not target.startswith("sqlite://"):
        assert _tables(target) == []


def test_backing_up_a_store_a_newer_taskq_migrated_says_to_use_that_taskq(
    tmp_path: Path,
) -> None:
    store_file = _migrated_by_a_newer_taskq(tmp_path / "migrated.db")
    backup = tmp_path / "nightly.db"
    ran = cli_runs.taskq("backup", str(backup), store=f"sqlite://{store_file}")
    line = one_error_line(ran, 1, "schema version 999, newer than this taskq knows")
    assert "take its backups with that taskq" in line
    assert "restore" not in line
    assert not backup.exists()


def test_a_backup_into_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    source = f"sqlite://{tmp_path / 'source.db'}"
    with taskq.Client(source):
        pass
    ran = cli_runs.taskq("backup", str(tmp_path / "nowhere" / "b.db"), store=source)
    # As a store's path in a missing directory is (docs/cli.md's rule): exit 2.
    one_error_line(ran, 2, "directory", "does not exist")
    assert ran.out == ""
    assert not (tmp_path / "nowhere").exists()


def test_a_backup_never_overwrites_a_file(tmp_path: Path) -> None:
    source = f"sqlite://{tmp_path / 'source.db'}"
    with taskq.Client(source):
        pass
    existing = tmp_path / "taken.backup"
    existing.write_text("keep me")
    ran = cli_runs.taskq("backup", str(existing), store=source)
    one_error_line(ran, 1, "exists: a backup goes to a new file")
    assert existing.read_text() == "keep me"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "source.db",
        "source.db-commits",  # the store's commits' mark (broker/stores/wal_watch.py)
        "taken.backup",
    ], "no partial file is left behind"


# The command, its copy made and not yet renamed into place when SIGTERM (a cron job's
# timeout) comes: sent by the command to itself at that moment, so the test needs no race.
_TERMINATED_MIDWAY = """
import os, signal, sys
from taskq.cli import backups
from taskq.cli.main import main
shown = backups._printer(False)
def show(event):
    if event["event"] == "backup_copied":
        os.kill(os.getpid(), signal.SIGTERM)
    shown(event)
backups._printer = lambda as_json: show
sys.exit(main(sys.argv[1:]))
"""


def test_a_backup_stopped_by_sigterm_leaves_no_partial_file(tmp_path: Path) -> None:
    source = f"sqlite://{tmp_path / 'source.db'}"
    with taskq.Client(source) as client:
        client.submit("tests.support.jobs:echo", 1, unchecked=True)
    target = tmp_path / "nightly.backup"
    ran = subprocess.run(
        [sys.executable, "-c", _TERMINATED_MIDWAY, "--store", source, "backup", str(target)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=cli_runs.REPO,
    )
    assert ran.returncode == 128 + signal.SIGTERM, ran
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "source.db",
        "source.db-commits",
    ], "the copy made so far is removed"
