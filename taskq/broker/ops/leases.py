"""Work under a lease: reports of finished attempts (heartbeats and progress: :mod:`.heartbeats`).

A claim (:mod:`taskq.broker.ops.claims`) gives each job a lease token new
for that claim; every later write about the job (a heartbeat, a report,
progress) is fenced by it, so a worker whose lease moved on changes nothing.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import msgspec

from taskq import errors, fast_json
from taskq.broker.ops import claims, dependencies, queries, workflows
from taskq.broker.ops.common import clock_tick, to_json
from taskq.broker.ops.heartbeats import MAX_PROGRESS_MESSAGE
from taskq.broker.ops.output import AttemptOutput, inline_text, output_statements
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import (
    AttemptReport,
    ClaimedJob,
    Fenced,
    JobState,
    Lease,
    WorkflowSubmission,
)
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement
from taskq.retry import exception_name

# -- reports ----------------------------------------------------------------------


class Backoff(msgspec.Struct, frozen=True):
    """Retry delays for a failure reported without its own ``retry_delay``.

    ``base * 2**(attempt-1)``, capped, times a random jitter factor: the
    worker sends each job's delay from its retry policy, so this serves
    callers that report without one.
    """

    base: float = 1.0
    cap: float = 3600.0
    jitter: float = 0.25

    def factor(self) -> float:
        import random  # Imported here, not with the module: a worker's start has no use for it

        return 1.0 + random.uniform(-self.jitter, self.jitter)


DEFAULT_BACKOFF = Backoff()


class ReportKind(enum.Enum):
    """What a worker reports about an attempt it ran, and so where its job goes."""

    COMPLETE = "complete"  # succeeded, with a result
    FAIL = "fail"  # retried later, or dead or failed
    RELEASE = "release"  # queued again, the attempt not counted (cancelled, if asked to)


class Report(msgspec.Struct, frozen=True):
    """One finished attempt, as reported under its lease."""

    lease: Lease
    kind: ReportKind
    attempt: AttemptReport
    result: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    result_json: str | None = None
    """The result as JSON text, stored as it is (the worker passes its child's own
    encoding through); when None, ``result`` is encoded here."""
    retry_delay: float | None = None
    """A failure's wait before its next attempt, from the job's retry policy (or the
    job's ``Retry(after=...)``); the store adds it to its own time. None: ``Backoff``.
    A release's wait before the job may be claimed again (None: at once)."""
    give_up: bool = False
    """A failure that ends the job ``dead`` whatever attempts are left (``taskq.Abort``)."""
    checkpoint_json: str | None = None
    """What the attempt last saved, stored with the job for the next one (None: unchanged)."""
    progress: float | None = None
    """The attempt's last progress (0..1, as its child checked it), stored with the job
    (None: unchanged). Progress reaches the store a few times a second while a job runs;
    what a job says just before it ends arrives only with its report."""
    progress_message: str = ""
    """The message of that last progress."""
    spawn: WorkflowSubmission | None = None
    """Jobs a completed attempt adds to its job's workflow (a fan-out), written with the
    report only if it is accepted: see :func:`taskq.broker.ops.workflows.spawn_statements`."""
    output: AttemptOutput | None = None
    """What the attempt wrote that its worker has not stored yet, stored ahead of the
    report and fenced by the same lease (see :mod:`taskq.broker.ops.output`)."""


# The statements that record each kind of report.
_REPORT_QUERIES = {
    ReportKind.COMPLETE: "job_complete",
    ReportKind.FAIL: "job_fail",
    ReportKind.RELEASE: "job_release",
}


def _report_statements(reports: Sequence[Report], backoff: Backoff) -> list[Statement]:
    """Statements recording ``reports``: one per kind of change, however many reports.

    The first finishes the attempts; each after it updates the jobs of one
    kind of report and returns the (id, lease_token) of every job it changed.
    """
    attempts: list[dict[str, Any]] = []
    by_kind: dict[ReportKind, list[dict[str, Any]]] = {kind: [] for kind in ReportKind}
    for report in reports:
        fence = {"job_id": report.lease.job_id, "lease_token": report.lease.token}
        error = None
        progress = _progress_fields(report)
        if report.kind is ReportKind.COMPLETE:
            result = report.result_json
            if result is None:
                result = to_json(report.result, "the result")
            row = {**fence, **progress, "result": result}
        elif report.kind is ReportKind.FAIL:
            error = to_json(report.error or {"type": "Error", "message": ""}, "the error")
            row = {
                **fence,
                **progress,
                "error": error,
                "retryable": int(report.retryable),
                "give_up": int(report.give_up),
                "delay": report.retry_delay,
                "jitter": backoff.factor(),
                "checkpoint": report.checkpoint_json,
            }
        else:
            if report.error is not None:
                # Why it was handed back unrun, for the attempt's record.
                error = to_json(report.error, "the error")
            row = {
                **fence,
                **progress,
                "checkpoint": report.checkpoint_json,
                "delay": report.retry_delay,
            }
        by_kind[report.kind].append(_without_nulls(row))
        attempt = report.attempt
        attempts.append(
            _without_nulls(
                {
                    **fence,
                    "waited": _span(attempt.waited_seconds),
                    "ran": _span(attempt.ran_seconds),
                    "outcome": attempt.outcome,
                    "exit_code": attempt.exit_code,
                    "signal": attempt.signal,
                    "peak_rss_bytes": attempt.peak_rss_bytes,
                    "cpu_seconds": _microseconds(attempt.cpu_seconds),
                    "error": error,
                    "output_end": None if report.output is None else report.output.end(),
                    "output_inline": inline_text(report.output),
                }
            )
        )
    statements = [
        Statement(queries.query("execution_finish"), {"reports": fast_json.dumps_text(attempts)})
    ]
    for kind, rows in by_kind.items():
        if not rows:
            continue
        params: dict[str, SqlValue] = {"reports": fast_json.dumps_text(rows)}
        if kind is ReportKind.FAIL:
            params |= {"backoff_base": backoff.base, "backoff_cap": backoff.cap}
        statements.append(Statement(_report_query(kind), params))
    return statements


@functools.cache
def _report_query(kind: ReportKind) -> str:
    """The statement for reports of ``kind``, with the ending every kind shares (and
    job_fail's test of a failure that queues its job again)."""
    return queries.query(_REPORT_QUERIES[kind]).format(
        job_report_end=queries.query("job_report_end"),
        job_fail_requeues=queries.query("job_fail_requeues"),
    )


def _span(seconds: float | None) -> float | None:
    """A worker's measure of a time span, if it is one; else the store keeps its own times."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return _microseconds(seconds)


def _microseconds(seconds: float | None) -> float | None:
    """``seconds`` to the microsecond, the finest a worker measures: 0.000584, not
    0.0005840000000000012, in every report a cluster's nodes parse and log."""
    return None if seconds is None else round(seconds, 6)


def _without_nulls(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` without its null fields: the statements read each field with ``->>``,
    which gives NULL for a field that is absent as for one that is null."""
    return {key: value for key, value in row.items() if value is not None}


def _progress_fields(report: Report) -> dict[str, Any]:
    """The progress a report carries, as its row gives it to the statements (none: unchanged)."""
    if report.progress is None:
        return {}
    return {
        "progress": float(report.progress),
        "progress_message": report.progress_message[:MAX_PROGRESS_MESSAGE],
    }


class ReportAnswer(msgspec.Struct, frozen=True):
    """What one request of reports (and maybe a claim) did: :func:`job_report_claim`'s answer."""

    fenced: list[Fenced]
    """Each report's verdict, in the order sent."""
    claimed: list[ClaimedJob]
    """The jobs the claim took (none without a claim)."""
    freed_queues: frozenset[str] = frozenset()
    """The queues where the write left jobs ready that its own claim did not take: released
    by the reports' ends, or spawned by them. Idle workers of these queues have work."""


def job_report(
    reports: Sequence[Report], *, backoff: Backoff = DEFAULT_BACKOFF, now: float | None = None
) -> Op[list[Fenced]]:
    """Record finished attempts in one request, each fenced by its own lease.

    Every report is accepted or refused on its own: a refused one (the lease
    moved on) changes nothing, and the worker drops its result. An unknown
    outcome is resolved by reading the jobs: one that left ``running`` under
    its token was recorded; one still running under its token is sent again;
    any other lost its lease.
    """
    answer = yield from job_report_claim(reports, None, backoff=backoff, now=now)
    return answer.fenced


def job_report_and_claim(
    reports: Sequence[Report],
    claim: claims.ClaimRequest,
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
    now: float | None = None,
) -> Op[tuple[list[Fenced], list[ClaimedJob]]]:
    """:func:`job_report`, and in the same request a claim for the freed slots.

    The claim is :func:`taskq.broker.ops.claims.job_claim`'s. A busy worker
    then commits once per batch of finished jobs instead of twice (on the
    embedded store, one fsync instead of two).
    """
    answer = yield from job_report_claim(reports, claim, backoff=backoff, now=now)
    return answer.fenced, answer.claimed


def job_report_claim(
    reports: Sequence[Report],
    claim: claims.ClaimRequest | None,
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
    now: float | None = None,
) -> Op[ReportAnswer]:
    """:func:`job_report_and_claim` (with no claim when ``claim`` is None), and where the
    write left jobs ready for other workers (``ReportAnswer.freed_queues``).

    Those are known only from a write whose outcome is known: after an unknown
    one the queues are left out, and the jobs are found by polling.
    """
    pending = list(reports)
    fenced: dict[Lease, Fenced] = {}
    claimed: list[ClaimedJob] = []
    freed: set[str] = set()
    if claim is not None and (claim.limit < 1 or not claim.queues):
        claim = None
    for _ in range(3):
        if not pending and claim is None:
            break
        batch = [clock_tick(now)]
        # Indexes of the statements whose rows name the jobs that took their report,
        # and of the release (dependencies.settle_statements ends with it).
        job_updates: range = range(0)
        release_at = None
        if pending:
            # Fan-outs first: each is fenced by its job's lease, as the report after it.
            for index, report in enumerate(pending):
                if report.spawn is not None and report.kind is ReportKind.COMPLETE:
                    try:
                        batch += yield from workflows.spawn_statements(
                            report.lease.job_id, report.lease.token, report.spawn
                        )
                    except errors.InvalidJob as exc:
                        pending[index] = _spawn_refused(report, exc)
            outputs = [r.output for r in pending if r.output is not None]
            batch += output_statements(outputs, reported=True)
            reporting = _report_statements(pending, backoff)
            job_updates = range(len(batch) + 1, len(batch) + len(reporting))
            # An end settles the jobs waiting on it (dependencies.settle_statements);
            # only an end other than success can doom one.
            doom = any(report.kind is not ReportKind.COMPLETE for report in pending)
            batch += [*reporting, *dependencies.settle_statements(cascade=doom)]
            release_at = len(batch) - 1
        claim_token = os.urandom(8).hex()  # as secrets.token_hex, without its import
        claim_at = len(batch)
        if claim is not None:
            batch += claims.claim_statements(claim, claim_token)
        try:
            results = yield Write(batch)
        except errors.OutcomeUnknown:
            if claim is not None:
                claimed = yield from claims.claimed_by_token(claim, claim_token)
                claim = None
            if not pending:
                break
            pending = yield from _unsettled(pending, fenced)
            continue
        taken = {
            (int(row["id"]), str(row["lease_token"]))
            for index in job_updates
            for row in results[index].rows
        }
        for report in pending:
            lease = report.lease
            fenced[lease] = (
                Fenced.ACCEPTED if (lease.job_id, lease.token) in taken else Fenced.LEASE_LOST
            )
        if claim is not None:
            claimed = claims.claimed_rows(results[claim_at].rows)
        if release_at is not None:
            freed |= _freed_queues(pending, fenced, results[release_at].rows, claimed)
        pending, claim = [], None
    if pending:
        raise errors.OutcomeUnknown(
            f"reports on jobs {[report.lease.job_id for report in pending]} could not be confirmed"
        )
    return ReportAnswer(
        fenced=[fenced[report.lease] for report in reports],
        claimed=claimed,
        freed_queues=frozenset(freed),
    )


def _spawn_refused(report: Report, exc: errors.InvalidJob) -> Report:
    """``report`` failed for good, spawning nothing, as the worker's check of a spawn fails
    it (``worker/spawn_names.py``): for a spawn refused since, say its parent pruned."""
    error = {"type": exception_name(type(exc)), "message": workflows.spawn_refusal(exc)}
    return msgspec.structs.replace(
        report,
        kind=ReportKind.FAIL,
        attempt=msgspec.structs.replace(report.attempt, outcome="error"),
        result=None,
        result_json=None,
        spawn=None,
        retryable=False,
        error={**error, "gave_up": "permanent"},
    )


def _freed_queues(
    sent: Sequence[Report],
    fenced: dict[Lease, Fenced],
    released: Sequence[Row],
    claimed: Sequence[ClaimedJob],
) -> set[str]:
    """The queues of the jobs a report write released or spawned and did not claim itself.

    A spawn's jobs count whether they wait or not, as a submit's do for the
    client's hint: the write does not say which it queued, and a hint is only
    a hint.
    """
    taken = {job.lease.job_id for job in claimed}
    queues = {str(row["queue"]) for row in released if int(row["id"]) not in taken}
    for report in sent:
        if report.spawn is not None and fenced.get(report.lease) is Fenced.ACCEPTED:
            queues.update(spec.queue for spec in report.spawn.jobs)
    return queues


def _unsettled(pending: list[Report], fenced: dict[Lease, Fenced]) -> Op[list[Report]]:
    """After an unknown outcome: settle in ``fenced`` each report the jobs' states tell of.

    Returns the reports whose job still runs under their lease: not recorded,
    so safe to send again.
    """
    ids = json.dumps([report.lease.job_id for report in pending])
    rows = yield Read(
        Statement(queries.query("job_lease_states"), {"ids": ids}), Consistency.LINEARIZABLE
    )
    found = {int(row["id"]): row for row in rows}
    still_running = []
    for report in pending:
        row = found.get(report.lease.job_id)
        if row is None or row["lease_token"] != report.lease.token:
            fenced[report.lease] = Fenced.LEASE_LOST
        elif row["state"] != JobState.RUNNING:
            fenced[report.lease] = Fenced.ACCEPTED
        else:
            still_running.append(report)
    return still_running
