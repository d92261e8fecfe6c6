"""taskq.testing: a user's jobs run inline, in the test's own process, with a worker's rules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest

import taskq
import taskq.testing
from taskq.broker.records import JobState

JOBS = "tests.support.user_jobs"


@pytest.fixture
def client() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(submitter="test") as opened:
        yield opened


def test_a_due_job_runs_in_this_process_and_its_result_is_stored(client: taskq.Client) -> None:
    handle = client.submit(f"{JOBS}:where_and_sum", 2, 3, unchecked=True)
    assert taskq.testing.run_due(client) == [handle.id]
    assert handle.result(timeout=0) == {"pid": os.getpid(), "sum": 5}
    [attempt] = client.executions(handle.id)
    assert attempt.worker_id == taskq.testing.INLINE_WORKER_ID


def test_an_async_job_runs_inline_too(client: taskq.Client) -> None:
    handle = client.submit(f"{JOBS}:async_double", 21, unchecked=True)
    taskq.testing.run_due(client)
    assert handle.result(timeout=0) == 42


def test_an_async_job_runs_inline_from_an_async_test_too(client: taskq.Client) -> None:
    handle = client.submit(f"{JOBS}:async_double", 4, unchecked=True)

    async def async_test() -> None:
        taskq.testing.run_due(client)  # on a running loop: the job's own runs beside it

    anyio.run(async_test)
    assert handle.result(timeout=0) == 8


def test_retries_wait_their_backoff_unless_delayed_jobs_are_run(client: taskq.Client) -> None:
    handle = client.submit(f"{JOBS}:flaky_until_third_attempt", max_attempts=3, unchecked=True)
    assert taskq.testing.run_due(client) == [handle.id]
    assert client.get(handle.id).state is JobState.QUEUED  # waiting out its backoff
    assert taskq.testing.run_due(client, delayed=True) == [handle.id, handle.id]
    job = client.get(handle.id)
    assert (job.state, job.attempts, job.result) == (JobState.SUCCEEDED, 3, {"attempt": 2})


def test_abort_and_a_call_that_does_not_fit_end_the_job_at_once(client: taskq.Client) -> None:
    aborted = client.submit(f"{JOBS}:give_up", max_attempts=3, unchecked=True)
    misfit = client.submit(f"{JOBS}:where_and_sum", 1, max_attempts=3, unchecked=True)
    taskq.testing.run_due(client, delayed=True)
    assert (client.get(aborted.id).state, client.get(aborted.id).attempts) == (JobState.DEAD, 1)
    job = client.get(misfit.id)
    assert (job.state, job.attempts) == (JobState.FAILED, 1)
    assert job.error is not None
    assert "missing a required argument: 'b'" in job.error["message"]


def test_current_job_outside_a_job_says_where_it_works() -> None:
    with pytest.raises(RuntimeError, match="only available inside a running job"):
        taskq.current_job()
