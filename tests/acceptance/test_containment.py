"""Containment with the real ``taskq-worker``: a job never outlives its worker, lease or policy.

Each test runs in both isolation modes where it applies. Jobs write their
pid to a file of the test's own; the test then watches that process through
a pidfd, so it sees the moment the job dies, and never signals it itself.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.broker.records import JobState
from tests.support.groups_at_import import GROUPS_NOTE_ENV
from tests.support.rqlite_cluster import running_cluster
from tests.support.worker_process import WorkerFleet, WorkerProcess, process_gone, wait_until

JOBS = "tests.support.jobs"
ISOLATIONS = ["pool", "process"]
# Long enough that no lease runs out by itself while a test looks on.
PATIENT = {"lease_seconds": 30, "heartbeat_seconds": 1, "lease_margin_seconds": 2}
# A lease short enough to run out within a test: killed at most 4 - 1 s after the last renewal.
SHORT_LEASE = {"lease_seconds": 4, "heartbeat_seconds": 0.5, "lease_margin_seconds": 1}


def _pid_from(path: Path, timeout: float = 30) -> int:
    assert wait_until(path.exists, timeout), f"the job never wrote {path}"
    return int(path.read_text())


def _wait_for_death(pid: int, timeout: float) -> float | None:
    """Block until ``pid`` exits; the wall-clock time it was seen dead, None if it lived on."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return time.time()
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            return None
        return time.time()
    finally:
        os.close(pidfd)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_job_dies_within_a_second_of_its_worker(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    worker = workers.start(store_url, worker={"isolation": isolation, **PATIENT})
    pidfile = tmp_path / "job.pid"
    client.submit(f"{JOBS}:record_pid_and_sleep", str(pidfile), 600, unchecked=True)
    job_pid = _pid_from(pidfile)

    killed_at = time.time()
    worker.send_signal(signal.SIGKILL)
    seen_dead = _wait_for_death(job_pid, timeout=30)

    assert seen_dead is not None, f"job {job_pid} outlived its SIGKILLed worker"
    assert seen_dead - killed_at < 1.0, f"the job lived {seen_dead - killed_at:.2f} s on"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_frozen_workers_job_is_killed_before_its_lease_can_expire(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    worker = workers.start(
        store_url, worker={"isolation": isolation, "maintenance": False, **SHORT_LEASE}
    )
    pidfile = tmp_path / "job.pid"
    handle = client.submit(
        f"{JOBS}:record_pid_and_sleep", str(pidfile), 600, max_attempts=3, unchecked=True
    )
    job_pid = _pid_from(pidfile)

    frozen_at = time.time()
    worker.send_signal(signal.SIGSTOP)
    try:
        seen_dead = _wait_for_death(job_pid, timeout=30)
        # Nothing renews the lease while the worker is frozen: this is its last word.
        lease_until = client.get(handle.id).lease_until
    finally:
        worker.send_signal(signal.SIGCONT)

    assert seen_dead is not None, f"job {job_pid} outlived its frozen worker's lease"
    assert lease_until is not None
    # The last renewal was sent before the freeze, so the lease ends by then at the latest.
    assert lease_until <= frozen_at + SHORT_LEASE["lease_seconds"]
    assert seen_dead < lease_until, (
        f"the job died {seen_dead - lease_until:.2f} s after its lease expired in the store"
    )
    # Woken up, the worker learns why and hands the job back; it lives on.
    finished = worker.wait_for_event("job_finished", job=handle.id, timeout=30)
    assert finished["status"] == "lease_expired", finished
    assert worker.running, worker.describe()
    job = client.get(handle.id)
    assert job.state is JobState.QUEUED or job.state is JobState.RUNNING, job
    assert job.attempts <= 1, job  # handed back, not counted as a failed attempt


@pytest.mark.rqlite
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_worker_cut_off_from_the_store_stops_its_job(
    isolation: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    """Every store node frozen: the worker cannot renew, so its job dies before the lease ends."""
    with running_cluster(tmp_path / "cluster") as cluster, taskq.Client(cluster.url) as client:
        worker = workers.start(cluster.url, worker={"isolation": isolation, **SHORT_LEASE})
        pidfile = tmp_path / "job.pid"
        handle = client.submit(f"{JOBS}:record_pid_and_sleep", str(pidfile), 600, unchecked=True)
        job_pid = _pid_from(pidfile)

        cut_at = time.time()
        nodes = [node.process for node in cluster.nodes if node.process is not None]
        for process in nodes:
            os.kill(process.pid, signal.SIGSTOP)
        try:
            seen_dead = _wait_for_death(job_pid, timeout=30)
        finally:
            for process in nodes:
                os.kill(process.pid, signal.SIGCONT)

        assert seen_dead is not None, f"job {job_pid} outlived the lease it could not renew"
        assert seen_dead < cut_at + SHORT_LEASE["lease_seconds"]
        finished = _first_end(worker, handle.id, timeout=60)
        assert finished["status"] == "lease_expired", finished
        assert worker.running, worker.describe()
        # While the cluster still answers: the job it may run again goes back at once, where a
        # drain after the cluster's end would wait out the stop's timeout (12 s each).
        workers.close(at_once=True)


def _first_end(worker: WorkerProcess, job_id: int, *, timeout: float) -> dict[str, Any]:
    """The first end the worker logged for ``job_id``: finished, or dropped.

    A cluster thawed a moment before the lease runs out may take longer than
    that moment to elect a leader again: the hand-back then reaches a store
    that has expired the lease itself and refuses the stale report (dropped),
    and the job may already run again. Either way this attempt ended as
    ``lease_expired``.
    """

    def ends() -> list[dict[str, Any]]:
        return [
            event
            for event in worker.events(job=job_id)
            if event.get("event") in ("job_finished", "job_dropped")
        ]

    assert wait_until(lambda: bool(ends()), timeout), worker.describe()
    return ends()[0]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_frozen_workers_job_still_ends_at_its_wall_clock(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    """The keeper enforces a job's timeout even while its worker cannot."""
    worker = workers.start(store_url, worker={"isolation": isolation, **PATIENT})
    pidfile = tmp_path / "job.pid"
    client.submit(f"{JOBS}:record_pid_and_sleep", str(pidfile), 600, timeout=2, unchecked=True)
    job_pid = _pid_from(pidfile)

    frozen_at = time.time()
    worker.send_signal(signal.SIGSTOP)
    try:
        seen_dead = _wait_for_death(job_pid, timeout=20)
    finally:
        worker.send_signal(signal.SIGCONT)

    assert seen_dead is not None, f"job {job_pid} ran on past its timeout"
    # Killed at its timeout (plus the keeper's grace): the lease would have kept it
    # alive until at least 27 s after the freeze.
    assert seen_dead < frozen_at + PATIENT["lease_seconds"] / 2


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_setsid_daemon_dies_with_its_job(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    workers.start(store_url, worker={"isolation": isolation})
    pidfile = tmp_path / "daemon.pid"
    handle = client.submit(f"{JOBS}:start_daemon", str(pidfile), unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.SUCCEEDED, client.executions(handle.id)
    daemon = int(pidfile.read_text())
    assert job.result == daemon
    assert wait_until(lambda: process_gone(daemon), 10), f"daemon {daemon} outlived its job"


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize(
    "target",
    ["os:system", "builtins:exec", "subprocess:check_call", f"{JOBS}:run_command", "json:dumps"],
)
def test_code_outside_the_workers_modules_never_runs(
    isolation: str,
    target: str,
    workers: WorkerFleet,
    client: taskq.Client,
    store_url: str,
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    argument = f"touch {marker}" if target != "subprocess:check_call" else ["touch", str(marker)]
    if target == "builtins:exec":
        argument = f"open({str(marker)!r}, 'w').close()"
    worker = workers.start(store_url, worker={"isolation": isolation})
    handle = client.submit(target, argument, max_attempts=3, unchecked=True)

    job = client.wait(handle.id, timeout=30)

    [execution] = client.executions(handle.id)
    assert execution.outcome == "policy", execution
    assert job.state is JobState.FAILED, job  # never retried: it would be refused again
    assert job.error is not None
    assert "not among this worker's modules" in job.error["message"], job.error
    assert not marker.exists()
    assert worker.running


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_job_cannot_read_the_store_url_or_credentials(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    secret_url = f"{store_url}?busy_timeout_ms=5000"
    workers.start(
        store_url,
        worker={"isolation": isolation},
        extra_env={
            "TASKQ_STORE": secret_url,
            "AWS_SECRET_ACCESS_KEY": "hunter2",
            "LAB_RUN": "7",
            "LAB_SECRET": "s3",
        },
        extra_args=["--env-passthrough", "LAB_RUN"],
    )
    handle = client.submit(f"{JOBS}:environment", unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.SUCCEEDED, client.executions(handle.id)
    seen: dict[str, str] = job.result
    assert "PATH" in seen
    # --env-passthrough replaces the config's list (which passes the test's tag).
    assert seen.get("LAB_RUN") == "7", sorted(seen)
    assert not {"TASKQ_TEST_WORKER_TAG", "LAB_SECRET"} & seen.keys(), sorted(seen)
    assert not {"TASKQ_STORE", "AWS_SECRET_ACCESS_KEY"} & seen.keys(), sorted(seen)
    assert not [name for name, value in seen.items() if store_url in value or "hunter2" in value]


def test_a_payload_over_the_size_limit_is_refused_and_nothing_is_written(
    client: taskq.Client,
) -> None:
    before = client.stats()
    with pytest.raises(errors.InvalidJob, match="over the limit of 1048576"):
        client.submit(f"{JOBS}:echo", "x" * (2 << 20), unchecked=True)
    with pytest.raises(errors.InvalidJob, match="over the limit"):
        client.submit_many(
            [
                taskq.call_spec(f"{JOBS}:echo", ["small"]),
                taskq.call_spec(f"{JOBS}:echo", ["x" * (2 << 20)]),
            ]
        )
    assert client.stats() == before
    assert client.list() == []
    # Just under the limit is fine: the bound is the payload's, not a guess.
    client.submit(f"{JOBS}:echo", "x" * ((1 << 20) - 200), unchecked=True)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_taskq_module_in_the_workers_folder_never_runs_in_its_children(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    # A user's own taskq.py beside the worker, or one a job wrote into the
    # folder it runs in: a child starting there imports the installed taskq.
    imported = tmp_path / "imported"
    folder = workers.root / "w"  # the folder the worker tagged "w" runs in
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "taskq.py").write_text(f"open({str(imported)!r}, 'w').close()\n")
    workers.start(store_url, tag="w", worker={"isolation": isolation})
    job = client.wait(client.submit(f"{JOBS}:add", 1, 2, unchecked=True).id, timeout=60)
    assert job.state is JobState.SUCCEEDED, client.executions(job.id)
    assert job.result == 3
    assert not imported.exists()


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_module_and_job_code_run_only_inside_the_jobs_control_groups(
    isolation: str, workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    # The keeper moves its job process into the groups while that process
    # imports taskq's own code; nothing else may run there before the move.
    note = tmp_path / "groups-at-import"
    worker = workers.start(
        store_url,
        worker={
            "isolation": isolation,
            "modules": ["tests.support", "tests.support.groups_at_import"],
            "env_passthrough": [GROUPS_NOTE_ENV],
        },
        extra_env={GROUPS_NOTE_ENV: str(note)},
    )
    assert "processes capped by cgroup" in worker.wait_for_event("worker_started")["containment"]
    handle = client.submit("tests.support.groups_at_import:own_groups", unchecked=True)
    job = client.wait(handle.id, timeout=60)
    assert job.state is JobState.SUCCEEDED, client.executions(handle.id)
    assert "/keeper-" in job.result
    imports = note.read_text().splitlines()
    if isolation == "pool":
        # Each pool child imports the modules as it starts, before its first job.
        assert imports
        assert all("/keeper-" in groups for groups in imports), imports
    else:
        # The job's own import, after the module check's child of its own.
        assert len(imports) == 2, imports
        assert "/keeper-" in imports[-1]


@pytest.mark.parametrize("isolation", ISOLATIONS)
# The second lifts its own RLIMIT_NPROC first: the cap is the control group's, not that.
@pytest.mark.parametrize("bomb", ["fork_until_refused", "lift_process_limit_and_fork"])
def test_a_fork_bomb_ends_at_its_process_cap(
    isolation: str, bomb: str, workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url, worker={"isolation": isolation})
    # The start-up line says what caps a job's processes: here, a control group.
    assert "processes capped by cgroup" in worker.wait_for_event("worker_started")["containment"]
    handle = client.submit(f"{JOBS}:{bomb}", 500, limits={"processes": 20}, unchecked=True)
    job = client.wait(handle.id, timeout=60)
    assert job.state is JobState.SUCCEEDED, client.executions(handle.id)
    # The job's own process counts against the cap, and whatever else the child holds.
    assert 0 < job.result < 20, job.result
    # Its sleeping children went with it: the next job runs in a sound child.
    after = client.wait(client.submit(f"{JOBS}:add", 1, 2, unchecked=True).id, timeout=30)
    assert after.result == 3
