"""The real ``taskq`` and ``taskq-worker`` against full, damaged and leaderless stores.

Each failure gives one clear line, nothing half-written, and a worker that
lives through what can pass. A full disk is a small tmpfs the test mounts
(root); clusters are started by the tests that kill their nodes.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

import taskq
from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from tests.support import cli_runs
from tests.support.cli_runs import one_error_line
from tests.support.damaged_store import damage_table, not_a_database
from tests.support.rqlite_cluster import RqliteCluster, running_cluster
from tests.support.small_filesystem import SmallFilesystem, small_filesystem
from tests.support.worker_process import WorkerFleet, WorkerProcess, wait_until

JOBS = "tests.support.jobs"


def assert_one_worker_error_line(worker: WorkerProcess, *fragments: str) -> None:
    """The worker exited non-zero after one ``taskq-worker: error:`` line."""
    code = worker.wait(60)
    assert code != 0, worker.describe()
    text = worker.log_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, worker.describe()
    assert lines[0].startswith("taskq-worker: error: "), worker.describe()
    for fragment in fragments:
        assert fragment in lines[0], worker.describe()
    assert "Traceback" not in text, worker.describe()
    assert "ExceptionGroup" not in text, worker.describe()


# -- a full disk ------------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    # Requested before ``workers``: the workers stop before it is unmounted.
    with small_filesystem(tmp_path / "fs", size="8m") as mounted:
        yield mounted


def test_a_worker_on_a_full_disk_says_so_once_and_finishes_its_jobs_once_space_is_freed(
    small_fs: SmallFilesystem, workers: WorkerFleet
) -> None:
    url = f"sqlite://{small_fs.path / 'taskq.db'}"
    with taskq.Client(url, submitter="acceptance") as client:
        worker = workers.start(url)
        assert client.submit(f"{JOBS}:add", 1, 2, unchecked=True).result(timeout=30) == 3
        slow = client.submit(f"{JOBS}:sleep", 5, max_attempts=5, unchecked=True)
        waiting = [
            client.submit(f"{JOBS}:add", n, n, max_attempts=5, unchecked=True) for n in range(3)
        ]
        worker.wait_for_event("job_started", job=slow.id)

        small_fs.fill()
        # Nothing more can be written: the slow job's report waits for space,
        # while claims and heartbeats fail over and over.
        worker.wait_for_event("store_unavailable", timeout=60)
        with pytest.raises(errors.StoreFull, match="database or disk is full"):
            client.submit(f"{JOBS}:add", 0, 0, unchecked=True)
        refused = cli_runs.taskq("submit", "--unchecked", f"{JOBS}:add", "1", "1", store=url)
        one_error_line(refused, 1, "database or disk is full", str(small_fs.path / "taskq.db"))
        assert worker.running, worker.describe()
        [told] = worker.events("store_unavailable")
        assert told["kind"] == "StoreFull"
        assert "database or disk is full" in told["error"]

        small_fs.free()
        worker.wait_for_event("store_recovered", timeout=30)
        assert slow.result(timeout=60) is None
        assert [job.result(timeout=60) for job in waiting] == [0, 2, 4]
        assert worker.running, worker.describe()
        assert len(worker.events("store_unavailable")) == 1, worker.describe()


@pytest.mark.parametrize("store", ["made before", "none yet"])
def test_a_worker_started_on_a_full_disk_says_so_once_and_starts_once_space_is_freed(
    small_fs: SmallFilesystem, workers: WorkerFleet, store: str
) -> None:
    url = f"sqlite://{small_fs.path / 'taskq.db'}"
    if store == "made before":
        open_store(url).close()
    small_fs.fill()
    worker = workers.start(url, wait_started=False)
    told = worker.wait_for_event("store_unavailable", timeout=60)
    assert told["kind"] == "StoreFull", told
    assert "full" in told["error"], told
    assert worker.running, worker.describe()
    assert worker.events("worker_started") == [], worker.describe()

    small_fs.free()
    worker.wait_for_event("worker_started", timeout=30)
    worker.wait_for_event("store_recovered", timeout=30)
    with taskq.Client(url, submitter="acceptance") as client:
        assert client.submit(f"{JOBS}:add", 1, 2, unchecked=True).result(timeout=30) == 3
    assert len(worker.events("store_unavailable")) == 1, worker.describe()


# -- a damaged store --------------------------------------------------------------------------


def test_a_worker_on_a_file_that_is_no_database_stops_with_one_line(
    tmp_path: Path, workers: WorkerFleet
) -> None:
    path = tmp_path / "taskq.db"
    not_a_database(path)
    worker = workers.start(f"sqlite://{path}", wait_started=False)
    assert_one_worker_error_line(worker, "file is not a database", str(path))


def test_a_worker_on_a_damaged_store_stops_with_one_line(
    tmp_path: Path, workers: WorkerFleet
) -> None:
    path = tmp_path / "taskq.db"
    open_store(f"sqlite://{path}").close()
    # It opens and its schema reads fine; registering the worker meets the damage.
    damage_table(path, "workers")
    worker = workers.start(f"sqlite://{path}", wait_started=False)
    assert_one_worker_error_line(worker, "malformed", str(path))


# -- opening a SQLite store from the command line ---------------------------------------------


def test_a_missing_directory_is_a_usage_error_and_nothing_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    for args in (["jobs"], ["submit", "--unchecked", f"{JOBS}:add", "1", "2"]):
        ran = cli_runs.taskq(*args, store=f"sqlite://{missing / 'x.db'}")
        one_error_line(ran, 2, str(missing), "does not exist")
        assert ran.out == ""
    assert not (tmp_path / "no").exists()


def test_a_read_only_command_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "taskq.db"
    url = f"sqlite://{path}"
    one_error_line(cli_runs.taskq("jobs", store=url), 1, "holds no taskq data yet")
    assert not path.exists()

    # A store an older taskq made: it knew only the first migration.
    shipped = migrations.load_migrations()
    with monkeypatch.context() as older:
        older.setattr(migrations, "load_migrations", lambda: shipped[:1])
        open_store(url).close()
    before = path.read_bytes()
    for args in (["jobs"], ["status", "1"], ["stats"], ["workers"]):
        behind = cli_runs.taskq(*args, store=url)
        one_error_line(behind, 1, f"schema version 1, this taskq uses {len(shipped)}")
    assert path.read_bytes() == before

    # A writing command brings the schema up to date; then reading works.
    submitted = cli_runs.taskq("submit", "--unchecked", f"{JOBS}:add", "1", "2", store=url)
    assert submitted.code == 0, submitted
    listed = cli_runs.taskq("jobs", "--json", store=url)
    assert listed.code == 0, listed
    assert [job["id"] for job in json.loads(listed.out)] == [int(submitted.out)]


# -- a cluster losing its leader, or its quorum -----------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RqliteCluster]:
    # Requested before ``workers``: the workers stop before the cluster does.
    with running_cluster(tmp_path / "cluster") as started:
        yield started


@pytest.mark.rqlite
def test_submit_and_wait_right_after_the_leader_is_killed(
    cluster: RqliteCluster, workers: WorkerFleet
) -> None:
    open_store(cluster.url).close()
    workers.start(cluster.url)
    leader = cluster.wait_for_leader()
    cluster.kill_node(leader, signal.SIGKILL)
    ran = cli_runs.taskq(
        "submit",
        "--unchecked",
        f"{JOBS}:add",
        "2",
        "3",
        "--wait",
        "--wait-timeout",
        "60",
        store=cluster.url,
    )
    assert ran.code == 0, ran
    assert ran.out == "5\n"


@pytest.mark.rqlite
def test_read_only_commands_work_with_two_of_three_nodes_down(cluster: RqliteCluster) -> None:
    url = cluster.url.replace("rqlite://", "rqlite://taskq:s3cret@")  # rqlite ignores them here
    with taskq.Client(url, submitter="acceptance") as client:
        job = client.submit(f"{JOBS}:add", 1, 2, queue="stale", unchecked=True)
    leader = cluster.wait_for_leader()
    survivor = next(node for node in cluster.nodes if node is not leader)
    assert wait_until(
        lambda: bool(cluster.local_rows(survivor, f"SELECT id FROM jobs WHERE id = {job.id}")),
        timeout=30,
    )
    for node in cluster.nodes:
        if node is not survivor:
            cluster.kill_node(node, signal.SIGKILL)

    listed = cli_runs.taskq("jobs", "--queue", "stale", "--json", store=url)
    assert listed.code == 0, listed
    assert [entry["id"] for entry in json.loads(listed.out)] == [job.id]
    assert "may be stale" in listed.err
    assert survivor.http_addr in listed.err

    described = cli_runs.taskq("cluster", store=url)
    assert described.code == 1, described
    # A node answers, so the lack of a leader is the cause, not the nodes not reached.
    assert "has no leader: the cluster cannot accept writes" in described.err
    assert "taskq:***@" in described.out
    assert "s3cret" not in described.out + described.err
    for node in cluster.nodes:
        assert node.base_url in described.out  # the dead ones too, by the address given


@pytest.mark.rqlite
def test_a_worker_rides_out_a_lost_quorum_and_resumes_by_itself(
    cluster: RqliteCluster, workers: WorkerFleet
) -> None:
    open_store(cluster.url).close()
    worker = workers.start(cluster.url)
    with taskq.Client(cluster.url, submitter="acceptance") as client:
        assert client.submit(f"{JOBS}:add", 1, 2, unchecked=True).result(timeout=30) == 3
        leader = cluster.wait_for_leader()
        down = [leader, next(node for node in cluster.nodes if node is not leader)]
        for node in down:
            cluster.kill_node(node, signal.SIGKILL)
        told = worker.wait_for_event("store_unavailable", timeout=60)
        assert told["kind"] == "StoreUnavailable", told
        for node in down:
            cluster.start_node(node)
        cluster.wait_for_leader(timeout=60)
        worker.wait_for_event("store_recovered", timeout=60)
        assert client.submit(f"{JOBS}:add", 2, 3, unchecked=True).result(timeout=60) == 5
    assert worker.running, worker.describe()
    # Told once, and again only when the kind of failure changes, not once per
    # try. A node just restarted
    # may answer before its database has caught up ("no such table"): a
    # second kind, told once too.
    # Each outage is told from its start: a node that rejoins after the worker
    # recovered may fail a request once more, an outage of its own.
    outages: list[list[str]] = [[]]
    for event in worker.events():
        if event.get("event") == "store_recovered":
            outages.append([])
        elif event.get("event") == "store_unavailable":
            outages[-1].append(event["kind"])
    kinds = [kind for outage in outages for kind in outage]
    assert kinds[0] == "StoreUnavailable", worker.describe()
    for outage in outages:
        assert all(a != b for a, b in pairwise(outage)), worker.describe()


def test_the_password_is_masked_in_every_output() -> None:
    url = "rqlite://bob:s3cret@127.0.0.1:1?retries=1"
    for args in (
        ["cluster"],
        ["cluster", "--json"],
        ["jobs"],
        ["submit", "--unchecked", f"{JOBS}:add", "1", "2"],
    ):
        ran = cli_runs.taskq(*args, store=url)
        assert ran.code == 1, ran
        assert "s3cret" not in ran.out + ran.err, ran
        assert "bob:***@127.0.0.1:1" in ran.out + ran.err, ran
