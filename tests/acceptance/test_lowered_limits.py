"""A job that asks for more than its worker's ``[worker.max_limits]`` is told why it got less.

It runs within the worker's most (docs/worker.md, Limits); the worker says
so in its log, and an attempt that ends at the lowered limit says what the
job asked for.
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.broker.records import JobState
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.jobs"


def test_a_job_killed_at_a_lowered_limit_says_what_it_asked_for(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url, max_limits={"wall_seconds": 1, "memory_bytes": "1GiB"})
    job = client.submit(
        f"{JOBS}:sleep",
        60,
        timeout=120,
        limits={"memory_bytes": "2GiB"},
        max_attempts=1,
        unchecked=True,
    )
    told = worker.wait_for_event("limits_lowered", job=job.id)
    assert told["lowered"] == "memory_bytes 2.0 GiB to 1.0 GiB, wall_seconds 2m00s to 1s", told
    assert "[worker.max_limits]" in told["hint"], told

    with pytest.raises(errors.JobFailed):
        job.result(timeout=60)
    ended = client.get(job.id)
    assert ended.state is JobState.DEAD, ended
    assert ended.error is not None, ended
    assert ended.error["message"].endswith(
        "(the job asked for wall_seconds 2m00s; this worker's [worker.max_limits] lowered it to 1s)"
    ), ended.error


def test_a_job_within_its_workers_limits_is_told_nothing(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url, max_limits={"wall_seconds": 300})
    job = client.submit(f"{JOBS}:echo", 1, timeout=60, max_attempts=1, unchecked=True)
    assert job.result(timeout=60) == 1
    worker.wait_for_event("job_finished", job=job.id)
    assert worker.events("limits_lowered") == [], worker.describe()
