"""A job back in its queue names no worker, on both stores; its attempts keep theirs.

Every way a running job goes back to ``queued`` (a drain's hand-back, a
retryable failure, a lease that ran out, a retry by hand of an ended job)
clears the job's worker, claim and start: ``taskq status`` and ``taskq jobs``
read them, and no worker holds a queued job. Each attempt keeps its worker and
times in its execution (``taskq logs``). A job that ends keeps those of the
attempt that ended it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import execution_list, job_cancel, job_get, job_retry
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.plan import Op
from taskq.broker.records import ClaimedJob, Fenced, Job, JobState
from taskq.broker.stores.store import Store
from tests.support.reports import failed, released, report_one

T0 = 1_800_000_000.0  # an injected store time, far from the real clock
LEASE = 30.0
ERROR = {"type": "ValueError", "message": "bad pixel"}


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def _run(store: Store, op: Op[Any]) -> Any:
    return plan.run(store, op)


def _enqueue(store: Store, queue: str, *, max_attempts: int = 3) -> int:
    spec = call_spec("tests.support.jobs:echo", [1], queue=queue, max_attempts=max_attempts)
    [job_id] = _run(store, job_enqueue([spec], now=T0))
    return int(job_id)


def _claim(store: Store, queue: str, worker: str, now: float) -> ClaimedJob:
    claimed: list[ClaimedJob] = _run(
        store, job_claim(worker, [queue], limit=1, lease_seconds=LEASE, now=now)
    )
    [job] = claimed
    return job


def _job(store: Store, job_id: int) -> Job:
    job: Job | None = _run(store, job_get(job_id))
    assert job is not None
    return job


def _holder(job: Job) -> tuple[str | None, float | None, float | None]:
    return job.worker_id, job.claimed_at, job.started_at


def test_a_job_handed_back_names_no_worker_and_its_attempt_keeps_its_own(
    store: Store, queue: str
) -> None:
    job_id = _enqueue(store, queue)
    claimed = _claim(store, queue, "w-draining", T0 + 1)
    assert _run(store, report_one(released(claimed.lease), now=T0 + 2)) is Fenced.ACCEPTED
    job = _job(store, job_id)
    assert (job.state, job.attempts) == (JobState.QUEUED, 0)
    assert _holder(job) == (None, None, None)
    [attempt] = _run(store, execution_list(job_id=job_id))
    assert (attempt.attempt, attempt.worker_id, attempt.outcome) == (1, "w-draining", "released")
    assert attempt.started_at == pytest.approx(T0 + 1, abs=0.1)
    # Its next claim names its new holder.
    _claim(store, queue, "w-next", T0 + 3)
    assert _job(store, job_id).worker_id == "w-next"


def test_a_job_failed_for_a_retry_names_no_worker_and_one_that_fails_keeps_its_last(
    store: Store, queue: str
) -> None:
    job_id = _enqueue(store, queue, max_attempts=2)
    first = _claim(store, queue, "w-1", T0 + 1)
    _run(store, report_one(failed(first.lease, ERROR), now=T0 + 2))
    job = _job(store, job_id)
    assert (job.state, job.error) == (JobState.QUEUED, ERROR)
    assert _holder(job) == (None, None, None)
    last = _claim(store, queue, "w-2", T0 + 3600)
    _run(store, report_one(failed(last.lease, ERROR), now=T0 + 3601))
    job = _job(store, job_id)
    assert job.state is JobState.DEAD
    assert (job.worker_id, job.claimed_at) == ("w-2", pytest.approx(T0 + 3600, abs=0.1))
    assert job.started_at == pytest.approx(T0 + 3600, abs=0.1)
    attempts = _run(store, execution_list(job_id=job_id))
    assert [(a.worker_id, a.outcome) for a in attempts] == [("w-1", "error"), ("w-2", "error")]


def test_a_job_whose_lease_ran_out_names_no_worker_once_queued_again(
    store: Store, queue: str
) -> None:
    again = _enqueue(store, queue, max_attempts=2)
    _claim(store, queue, "w-silent", T0 + 1)
    spent = _enqueue(store, queue, max_attempts=1)
    _claim(store, queue, "w-silent", T0 + 2)
    result = _run(store, job_requeue_expired(now=T0 + LEASE + 10))
    assert (again in result.requeued, spent in result.dead) == (True, True)
    job = _job(store, again)
    assert job.state is JobState.QUEUED
    assert _holder(job) == (None, None, None)
    # Its error still names the worker whose lease ran out.
    assert job.error == {"type": "LeaseExpired", "message": "the lease of worker w-silent expired"}
    # The job it ends dead keeps the worker of its last attempt.
    assert _job(store, spent).worker_id == "w-silent"
    [attempt] = _run(store, execution_list(job_id=again))
    assert (attempt.worker_id, attempt.outcome) == ("w-silent", "lease_expired")


def test_a_job_retried_by_hand_names_no_worker(store: Store, queue: str) -> None:
    job_id = _enqueue(store, queue, max_attempts=1)
    claimed = _claim(store, queue, "w-1", T0 + 1)
    _run(store, report_one(failed(claimed.lease, ERROR, retryable=False), now=T0 + 2))
    assert _job(store, job_id).worker_id == "w-1"
    assert _run(store, job_retry([job_id], now=T0 + 3)) == [job_id]
    job = _job(store, job_id)
    assert job.state is JobState.QUEUED
    assert _holder(job) == (None, None, None)


def test_a_job_handed_back_after_its_cancel_keeps_its_worker(store: Store, queue: str) -> None:
    job_id = _enqueue(store, queue)
    claimed = _claim(store, queue, "w-1", T0 + 1)
    _run(store, job_cancel([job_id], now=T0 + 2))
    _run(store, report_one(released(claimed.lease), now=T0 + 3))
    job = _job(store, job_id)
    assert job.state is JobState.CANCELLED
    assert (job.worker_id, job.started_at) == ("w-1", pytest.approx(T0 + 1, abs=0.1))
