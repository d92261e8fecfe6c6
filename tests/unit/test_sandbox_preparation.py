"""Preparing a claimed job once: its payload parsed, the policy applied, its limits lowered."""

from __future__ import annotations

from typing import Any

from taskq.broker.limits import Limits
from taskq.broker.records import ClaimedJob, Lease, PayloadKind
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.outcome import Outcome, Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.protocol import JobIdentity, JobRequest

WORKER_MAX = Limits(memory_bytes=512 << 20, wall_seconds=60.0)
PREPARER = JobPreparer(
    policy=Policy(modules=("pkg",)), worker_max=WORKER_MAX, import_path=["/srv/jobs"]
)


def job(
    payload: dict[str, Any],
    *,
    kind: PayloadKind = PayloadKind.CALL,
    limits: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> ClaimedJob:
    return ClaimedJob(Lease(1, "t"), kind, payload, "default", 1, 3, timeout, limits or {}, 0.0)


def test_a_job_without_limits_gets_the_worker_maximums() -> None:
    request = PREPARER.prepare(job({"target": "pkg.mod:run", "args": [1]}))
    assert request == JobRequest(
        CallPayload("pkg.mod:run", [1]),
        WORKER_MAX,
        ["/srv/jobs"],
        ["pkg"],
        JobIdentity(id=1, attempt=1, queue="default", max_attempts=3),
    )


def test_limits_are_lowered_to_the_worker_maximums_and_the_timeout_is_the_wall_clock() -> None:
    asked = {"memory_bytes": "2GiB", "cpu_seconds": 5, "wall_seconds": 30}
    request = PREPARER.prepare(job({"target": "pkg.mod:run"}, limits=asked, timeout=90))
    assert isinstance(request, JobRequest)
    assert request.limits.memory_bytes == WORKER_MAX.memory_bytes
    assert request.limits.cpu_seconds == 5
    assert request.limits.wall_seconds == WORKER_MAX.wall_seconds


def status_of(claimed: ClaimedJob) -> Status:
    prepared = PREPARER.prepare(claimed)
    assert isinstance(prepared, Outcome)
    return prepared.status


def test_a_malformed_job_is_an_invalid_result_and_a_refused_one_a_policy_outcome() -> None:
    assert status_of(job({"target": "not a target"})) is Status.RESULT_INVALID
    assert status_of(job({"target": "pkg.mod:run"}, limits={"memory": 1})) is Status.RESULT_INVALID
    assert status_of(job({"target": "os:system", "args": ["true"]})) is Status.POLICY
    assert status_of(job({"argv": ["true"]}, kind=PayloadKind.SHELL)) is Status.POLICY
