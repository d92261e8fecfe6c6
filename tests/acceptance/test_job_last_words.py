"""What a job says just before it ends, kept with it by a real ``taskq-worker``.

A job's progress reaches the store a few times a second while it runs; a
job that reports and ends at once must still leave its last progress with
its attempt.
"""

from __future__ import annotations

import pytest

import taskq
from taskq.broker.records import JobState
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.last_words"
ISOLATIONS = ["pool", "process"]
# Several jobs each: a lost last report shows in one of them however the race goes.
QUICK_JOBS = 8


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize(
    ("target", "state", "fraction"),
    [("progress_and_return", JobState.SUCCEEDED, 1.0), ("progress_and_fail", JobState.DEAD, 0.5)],
)
def test_a_quick_jobs_last_progress_is_kept_with_it(
    isolation: str,
    target: str,
    state: JobState,
    fraction: float,
    workers: WorkerFleet,
    client: taskq.Client,
    store_url: str,
) -> None:
    workers.start(store_url, worker={"isolation": isolation})
    handles = client.submit_many(
        [taskq.call_spec(f"{JOBS}:{target}", [n], max_attempts=1) for n in range(QUICK_JOBS)]
    )
    for n, handle in enumerate(handles):
        job = client.wait(handle.id, timeout=60)
        assert job.state is state, job
        assert (job.progress, job.progress_message) == (fraction, f"{n} lines read"), job
