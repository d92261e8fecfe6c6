"""Workers of one queue that import different modules, on both stores.

A job the worker that claimed it may not run (its target's module is not
among that worker's ``--modules``) goes back, unrun and its attempt not
counted, when another live worker of the queue declares the target; it
ends failed, as before, when none does.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from taskq.dev.processes import wait_until
from tests.support.cli_runs import ok
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.worker_process import WorkerFleet, freeze_between_writes

NAME = "tests.support.counted_jobs:count_words"
WAIT_SECONDS = 60.0


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'taskq.db'}"
    else:
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        yield cluster.url


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

    def declared() -> bool:
        return any(serving.worker_id in each.workers for each in client.functions())

    assert wait_until(declared, timeout=WAIT_SECONDS), "count_words was never declared"
    # Frozen, the serving worker is still live (its heartbeat is recent) but claims
    # nothing: the job can only go to the other worker first.
    if store.startswith("sqlite"):
        freeze_between_writes(serving, tmp_path / "taskq.db")
    else:
        serving.send_signal(signal.SIGSTOP)
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
