"""Reports of one attempt, as the tests make them: the worker's three outcomes, one at a time.

The broker takes reports in batches (``job_report``); a test that settles one
job reads better with one call and one answer.
"""

from __future__ import annotations

from typing import Any

from taskq.broker.ops.leases import DEFAULT_BACKOFF, Backoff, Report, ReportKind, job_report
from taskq.broker.ops.plan import Op
from taskq.broker.records import AttemptReport, Fenced, Lease


def completed(lease: Lease, result: Any, attempt: AttemptReport | None = None) -> Report:
    """Success, with its result."""
    return Report(
        lease, ReportKind.COMPLETE, attempt or AttemptReport(outcome="succeeded"), result=result
    )


def failed(
    lease: Lease,
    error: dict[str, Any],
    attempt: AttemptReport | None = None,
    *,
    retryable: bool = True,
) -> Report:
    """A failed attempt: retried with backoff while attempts remain, unless not ``retryable``."""
    return Report(
        lease,
        ReportKind.FAIL,
        attempt or AttemptReport(outcome="error"),
        error=error,
        retryable=retryable,
    )


def released(lease: Lease, attempt: AttemptReport | None = None) -> Report:
    """The job given back, its attempt not counted (cancelled instead, if that was asked)."""
    return Report(lease, ReportKind.RELEASE, attempt or AttemptReport(outcome="released"))


def report_one(
    report: Report, *, backoff: Backoff = DEFAULT_BACKOFF, now: float | None = None
) -> Op[Fenced]:
    """Record one report; whether its lease still held."""
    [fenced] = yield from job_report([report], backoff=backoff, now=now)
    return fenced
