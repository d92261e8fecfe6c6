"""No job claimed ahead waits behind a long one while another worker could run it.

Two single-slot workers have seen short jobs, so each claims a few ahead.
Then one long job comes with 40 short ones in one batch: whichever worker
took the long job hands back what it claimed ahead (unstarted, no attempt
used), and the other runs them while the long job still runs. Each attempt
records its own run, from the start of its code, apart from its claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.jobs"
SHORT = 40
# A 0.01 s job's attempt, from the start of its code to its end, even with
# every core busy; the wait behind the long job it was claimed with is not in it.
SHORT_RUN_SECONDS = 0.5


pytestmark = pytest.mark.both_stores


@pytest.fixture
def client(store_url: str) -> Iterator[taskq.Client]:
    with taskq.Client(store_url, submitter="acceptance") as opened:
        yield opened


def test_short_jobs_claimed_behind_a_long_one_go_to_the_idle_worker(
    workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    queue = f"handback-{uuid.uuid4().hex[:8]}"
    for tag in ("a", "b"):
        workers.start(store_url, tag=tag, worker={"concurrency": 1, "queues": [queue]})
    short = taskq.call_spec(f"{JOBS}:sleep", [0.01], queue=queue)
    for handle in client.submit_many([short] * 200):
        handle.result(timeout=120)

    gate = tmp_path / "gate"
    long_job, *shorts = client.submit_many(
        [taskq.call_spec(f"{JOBS}:wait_for_file", [str(gate), 120], queue=queue)] + [short] * SHORT
    )
    try:
        for handle in shorts:
            handle.result(timeout=60)
        assert client.get(long_job.id).state is JobState.RUNNING
        for handle in shorts:
            job = client.get(handle.id)
            runs = [e for e in client.executions(handle.id) if e.outcome != "released"]
            assert job.attempts == 1, (job, client.executions(handle.id))
            assert [run.outcome for run in runs] == ["succeeded"]
            [run] = runs
            assert run.claimed_at is not None
            assert run.finished_at is not None
            assert run.claimed_at <= run.started_at <= run.finished_at
            assert run.finished_at - run.started_at < SHORT_RUN_SECONDS, run
    finally:
        gate.touch()
    assert long_job.result(timeout=60) is True
