"""What a job says just before it ends, kept with it by a real ``taskq-worker``.

A job's progress reaches the store a few times a second while it runs; a
job that reports and ends at once must still leave its last progress with
its attempt. A job that fails leaves one traceback with its record: the
job's own frames, none of the runner's that called it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from tests.support.cli_runs import ok
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


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("target", ["fail_in_a_helper", "fail_in_an_async_helper"])
def test_a_failed_jobs_traceback_holds_its_own_frames_once(
    isolation: str, target: str, workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url, worker={"isolation": isolation})
    handle = client.submit(f"{JOBS}:{target}", "x1", max_attempts=1, unchecked=True)
    job = client.wait(handle.id, timeout=60)
    assert job.state is JobState.DEAD, job
    assert job.error is not None, job
    traceback = job.error["traceback"]
    # The chain, in order: the cause in the helper, then the job's own error.
    assert traceback.count("Traceback (most recent call last):") == 2, traceback
    assert "The above exception was the direct cause" in traceback, traceback
    assert traceback.index("in parse_line") < traceback.index("cannot parse 'x1'"), traceback
    assert f"in {target}" in traceback, traceback
    assert traceback.rstrip().endswith("LastWordsFailed: cannot parse 'x1'"), traceback
    # Nothing of the runner: neither taskq's frames nor the event loop's. (By the
    # package's own folder: a checkout's folder may well be named taskq too.)
    assert f"{Path(taskq.__file__).parent}{os.sep}" not in traceback, traceback
    assert "asyncio" not in traceback, traceback
    assert "During handling" not in traceback, traceback

    [attempt] = client.executions(handle.id)
    assert attempt.error == job.error
    assert "Traceback" not in (attempt.log_tail or ""), attempt.log_tail
    # The command line names the error once, for the job and for its one attempt.
    for command in ("status", "logs"):
        printed = ok(command, str(handle.id), store=store_url).out
        assert printed.count("cannot parse 'x1'") == 1, printed
