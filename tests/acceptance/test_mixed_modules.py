"""Workers of one queue under different policies, on both stores.

A job the worker that claimed it may not run (its target's module is not
among that worker's ``--modules``, or it is a shell command and the worker
has no ``allow_shell``) goes back, unrun and its attempt not counted, when
another live worker of the queue may run it; it ends failed, as before,
when none may.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from tests.support.cli_runs import ok
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.worker_process import WorkerFleet, WorkerProcess, freeze_between_writes

NAME = "tests.support.counted_jobs:count_words"
WAIT_SECONDS = 60.0


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'taskq.db'}"
    else:
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        yield cluster.url


def _freeze(worker: WorkerProcess, store: str, tmp_path: Path) -> None:
    """Frozen, a worker is still live (its heartbeat is recent) but claims nothing:
    a job submitted now can only go to another worker first."""
    if store.startswith("sqlite"):
        freeze_between_writes(worker, tmp_path / "taskq.db")
    else:
        worker.send_signal(signal.SIGSTOP)


def _handed_back_then_run(
    store: str,
    workers: WorkerFleet,
    client: taskq.Client,
    handle: taskq.JobHandle,
    *,
    serving: WorkerProcess,
    refusing: dict[str, object],
) -> None:
    """``handle``'s job, submitted while ``serving`` is frozen, is refused by a worker of
    the ``refusing`` settings, handed back, and run by ``serving`` once it thaws."""
    other = workers.start(store, tag="refusing", worker=refusing)
    other.wait_for_event("job_finished", timeout=WAIT_SECONDS, status="released")
    assert client.get(handle.id).state in {JobState.QUEUED, JobState.RUNNING}
    serving.send_signal(signal.SIGCONT)
    handle.result(timeout=WAIT_SECONDS)
    done = client.get(handle.id)
    # Run where the policy allows it, and the attempts given back not counted.
    assert (done.state, done.worker_id, done.attempts) == (
        JobState.SUCCEEDED,
        serving.worker_id,
        1,
    )
    refused = [each for each in client.executions(handle.id) if each.outcome == "released"]
    assert refused
    assert {each.worker_id for each in refused} == {other.worker_id}


def test_a_job_refused_by_one_worker_runs_on_the_one_that_declares_it(
    store: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    queue = f"mixed-{uuid.uuid4().hex[:8]}"
    serving = workers.start(
        store,
        tag="full",
        worker={"modules": ["tests.support.counted_jobs"], "queues": [queue]},
    )
    client = taskq.Client(store)
    # It publishes its declared jobs before it registers, and says it started once registered.
    serving.wait_for_event("worker_started", timeout=WAIT_SECONDS)
    _freeze(serving, store, tmp_path)
    handle = client.submit(NAME, "a b c", queue=queue)
    other = workers.start(
        store, tag="partial", worker={"modules": ["tests.support.jobs"], "queues": [queue]}
    )
    other.wait_for_event("job_finished", timeout=WAIT_SECONDS, status="released")
    # Given back, not failed (it may be claimed, and given back, again meanwhile).
    assert client.get(handle.id).state in {JobState.QUEUED, JobState.RUNNING}
    refused = next(each for each in client.executions(handle.id) if each.outcome == "released")
    assert refused.worker_id == other.worker_id
    assert refused.error is not None
    assert "not among this worker's modules" in refused.error["message"]
    logs = ok("logs", str(handle.id), store=store).out
    assert "attempt 1 of 5  released (handed back unrun or unfinished: not counted)" in logs

    serving.send_signal(signal.SIGCONT)
    assert handle.result(timeout=WAIT_SECONDS) == 3
    done = client.get(handle.id)
    # Run where it is declared, and the attempts given back not counted.
    assert (done.worker_id, done.attempts) == (serving.worker_id, 1)


def test_a_job_no_live_worker_declares_still_fails_at_once(
    store: str, workers: WorkerFleet
) -> None:
    queue = f"alone-{uuid.uuid4().hex[:8]}"
    workers.start(store, worker={"modules": ["tests.support.jobs"], "queues": [queue]})
    client = taskq.Client(store)
    handle = client.submit(NAME, "a b c", queue=queue, unchecked=True)
    with pytest.raises(taskq.errors.JobFailed, match="not among this worker's modules"):
        handle.result(timeout=WAIT_SECONDS)
    assert client.get(handle.id).state is JobState.FAILED


def test_a_shell_job_refused_by_one_worker_runs_on_the_one_that_allows_shell(
    store: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    queue = f"shell-{uuid.uuid4().hex[:8]}"
    serving = workers.start(store, tag="shell", worker={"allow_shell": True, "queues": [queue]})
    _freeze(serving, store, tmp_path)
    client = taskq.Client(store)
    handle = client.submit_shell(["echo", "ran"], queue=queue)
    _handed_back_then_run(
        store, workers, client, handle, serving=serving, refusing={"queues": [queue]}
    )
    assert handle.result(timeout=WAIT_SECONDS)["stdout"] == "ran\n"


def test_a_plain_call_refused_by_one_worker_runs_on_the_one_that_lists_its_module(
    store: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    queue = f"plain-{uuid.uuid4().hex[:8]}"
    serving = workers.start(
        store, tag="jobs", worker={"modules": ["tests.support.jobs"], "queues": [queue]}
    )
    _freeze(serving, store, tmp_path)
    client = taskq.Client(store)
    # Declared nowhere: only the serving worker's --modules say it may run there.
    handle = client.submit("tests.support.jobs:add", 2, 3, queue=queue, unchecked=True)
    refusing = {"modules": ["tests.support.counted_jobs"], "queues": [queue]}
    _handed_back_then_run(store, workers, client, handle, serving=serving, refusing=refusing)
    assert handle.result(timeout=WAIT_SECONDS) == 5


def test_a_shell_job_no_live_worker_allows_fails_at_once(store: str, workers: WorkerFleet) -> None:
    queue = f"no-shell-{uuid.uuid4().hex[:8]}"
    for tag in ("first", "second"):
        workers.start(store, tag=tag, worker={"queues": [queue]})
    client = taskq.Client(store)
    handle = client.submit_shell(["echo", "ran"], queue=queue)
    with pytest.raises(taskq.errors.JobFailed, match="shell payloads are disabled"):
        handle.result(timeout=WAIT_SECONDS)
    failed = client.get(handle.id)
    assert failed.state is JobState.FAILED
    assert failed.error is not None
    assert failed.error["type"] == "PolicyRefused"
    # Refused once, by whichever worker claimed it: never handed back to the other.
    assert [each.outcome for each in client.executions(handle.id)] == ["policy"]
