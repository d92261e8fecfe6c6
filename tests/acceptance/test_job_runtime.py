"""Job code and the runtime with a real ``taskq-worker``: async jobs, retries, checkpoints.

Times are the store's own (executions' started_at and finished_at), never
the test's wall clock.
"""

from __future__ import annotations

import pytest

import taskq
from taskq.broker.records import JobState
from taskq.retry import RetryPolicy
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.runtime_jobs"
QUICK = RetryPolicy(base=0.05, jitter=0.0)


@pytest.mark.parametrize("isolation", ["pool", "process"])
def test_an_async_job_runs_on_an_event_loop_in_either_kind_of_child(
    workers: WorkerFleet, client: taskq.Client, store_url: str, isolation: str
) -> None:
    workers.start(store_url, worker={"isolation": isolation})
    spec = taskq.call_spec(f"{JOBS}:async_greet", ["ada"], kwargs={"punctuation": "!"})
    [handle] = client.submit_many([spec])
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.SUCCEEDED, job
    assert job.result == {"greeting": "hello ada!", "job": handle.id, "attempt": 1}


def test_an_async_job_past_its_timeout_is_killed_as_a_sync_one_is(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url)
    handle = client.submit(f"{JOBS}:async_sleep", 30, timeout=0.5, max_attempts=1, unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.DEAD, job
    assert [run.outcome for run in client.executions(handle.id)] == ["timeout"]


def test_a_running_async_job_is_cancelled_as_a_sync_one_is(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url)
    handle = client.submit(f"{JOBS}:async_sleep", 30, max_attempts=1, unchecked=True)
    worker.wait_for_event("job_started", job=handle.id)
    handle.cancel()
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.CANCELLED, job
    # The worker's log says it was a cancel, not a lease that ran out.
    worker.wait_for_event("cancel_requested", job=handle.id)
    finished = worker.wait_for_event("job_finished", job=handle.id)
    assert (finished["status"], finished["stopped"]) == ("cancelled", "cancelled"), finished


def test_retry_after_reruns_the_job_no_sooner_than_it_asked(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url)
    handle = client.submit(f"{JOBS}:retry_once_after", 2, max_attempts=3, unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.SUCCEEDED, job
    assert job.result == 2
    first, second = client.executions(handle.id)
    assert first.outcome == "error"
    assert first.finished_at is not None
    assert second.started_at - first.finished_at >= 2.0


def test_abort_ends_the_job_dead_after_one_attempt(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url)
    handle = client.submit(f"{JOBS}:abort", "the input is gone", max_attempts=5, unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.DEAD, job
    assert job.attempts == 1
    assert job.error is not None
    assert job.error["type"] == "taskq.retry.Abort"
    assert job.error["message"] == "the input is gone"


def test_retry_on_retries_only_the_exceptions_it_names(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url)
    policy = RetryPolicy(base=0.05, jitter=0.0, retry_on=(ConnectionError,))
    other = client.submit(
        f"{JOBS}:raise_named", "ValueError", max_attempts=3, retry=policy, unchecked=True
    )
    named = client.submit(
        f"{JOBS}:raise_named", "ConnectionResetError", max_attempts=3, retry=policy, unchecked=True
    )
    other_job = client.wait(other.id, timeout=30)
    assert (other_job.state, other_job.attempts) == (JobState.FAILED, 1), other_job
    named_job = client.wait(named.id, timeout=30)
    assert (named_job.state, named_job.attempts) == (JobState.DEAD, 3), named_job
    assert named_job.retry is not None
    assert named_job.retry["retry_on"] == ["ConnectionError"]


@pytest.mark.parametrize(
    ("target", "args", "complaint"),
    [
        ("two_arguments", [1, 2, 3], "too many positional arguments"),
        ("no_such_function", [], "no_such_function"),
        ("", [], "No module named"),
    ],
)
def test_a_job_that_cannot_run_as_asked_ends_after_one_attempt(
    workers: WorkerFleet,
    client: taskq.Client,
    store_url: str,
    target: str,
    args: list[int],
    complaint: str,
) -> None:
    workers.start(store_url)
    name = f"{JOBS}:{target}" if target else "tests.support.no_such_module:run"
    handle = client.submit(name, *args, max_attempts=3, retry=QUICK, unchecked=True)
    job = client.wait(handle.id, timeout=30)
    assert (job.state, job.attempts) == (JobState.FAILED, 1), job
    assert job.error is not None
    assert job.error["gave_up"] == "permanent"
    assert complaint in job.error["message"]


@pytest.mark.parametrize("isolation", ["pool", "process"])
def test_a_checkpoint_saved_before_a_crash_is_read_by_the_next_attempt(
    workers: WorkerFleet, client: taskq.Client, store_url: str, isolation: str
) -> None:
    workers.start(store_url, worker={"isolation": isolation})
    handle = client.submit(
        f"{JOBS}:checkpoint_then_crash", 41, max_attempts=2, retry=QUICK, unchecked=True
    )
    job = client.wait(handle.id, timeout=30)
    assert job.state is JobState.SUCCEEDED, (job, client.executions(handle.id))
    assert job.result == {"resumed_from": {"step": 41}, "attempt": 2}
    assert [run.outcome for run in client.executions(handle.id)] == ["crashed", "succeeded"]
    assert job.checkpoint == {"step": 41}
