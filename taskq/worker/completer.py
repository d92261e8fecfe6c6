"""Reporting finished jobs: each attempt's report, its batch, and the store's verdict on it.

A slot hands over a job and its outcome and moves on. The report goes with
the next batch (``AckBatcher``), fenced by the job's lease: a result the
store refuses is dropped, never forced in. The job stays held until the
store has answered; then its place is freed and its end is an event line,
``job_finished`` or, when the lease had moved on, ``job_dropped``.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

import msgspec

from taskq.broker.ops.leases import Report
from taskq.broker.records import Fenced
from taskq.worker.acks import AckBatcher
from taskq.worker.events import EventLog
from taskq.worker.reports import report_of
from taskq.worker.running import STOPPED_WORDS, RunningJob, StopReason
from taskq.worker.sandbox.outcome import Outcome, Status, error_info
from taskq.worker.slots import Slots


class Completer:
    """Turns finished jobs into reports for the batcher, and answers their verdicts."""

    def __init__(self, *, acks: AckBatcher, slots: Slots, events: EventLog) -> None:
        self._acks = acks
        self._slots = slots
        self._events = events

    def report(self, running: RunningJob, outcome: Outcome) -> None:
        """Queue the job's report; once the store has answered, log it and free its place."""
        running.reporting = True
        stopped = _stopped_because(running, outcome)
        outcome = _saying_why(outcome, stopped)
        # The job's code started its wall time before now, which is its end
        # (or as near as the slot can tell); before that it waited from its claim.
        waited = max(time.monotonic() - outcome.wall_seconds - running.claimed, 0.0)
        report = report_of(
            running.job,
            stopped,
            outcome,
            running.checkpoint_json,
            running.progress,
            waited,
            running.unsent_output(),
        )
        verdict = self._acks.submit(report, urgent=self._may_free_jobs(running, report))
        verdict.add_done_callback(
            partial(
                self._answered, running=running, report=report, stopped=stopped, outcome=outcome
            )
        )

    def _may_free_jobs(self, running: RunningJob, report: Report) -> bool:
        """Whether the report should go at once: the jobs it may free wait for it.

        A spawn always. The end of a job with children only when the worker
        holds no other such job yet to report: the parents of a fan-in all
        have children, but only the last one's report releases it, and a
        report each would cost a wide fan-in its batching (on a cluster,
        a write each). A job's last parent is the last of its worker's.
        """
        if report.spawn is not None:
            return True
        if not running.job.has_children:
            return False
        return not any(
            held.job.has_children and not held.reporting
            for held in self._slots.held.values()
            if held is not running
        )

    def _answered(
        self,
        verdict: asyncio.Future[Fenced],
        *,
        running: RunningJob,
        report: Report,
        stopped: str | None,
        outcome: Outcome,
    ) -> None:
        self._slots.release(running)
        if verdict.cancelled():
            return
        self._events.emit(
            "job_finished" if verdict.result() is Fenced.ACCEPTED else "job_dropped",
            job=running.job.lease.job_id,
            status=report.attempt.outcome,
            stopped=stopped or "",
            # The job's own run, as its attempt records it; ``held_seconds`` is
            # the worker's hold, claim to verdict, which a slow report (a store
            # outage) lengthens.
            seconds=round(outcome.wall_seconds, 3),
            held_seconds=round(time.monotonic() - running.started, 3),
            peak_rss_mib=round((outcome.peak_rss_bytes or 0) / 2**20, 1),
            error=(outcome.error or {}).get("message", "")[:200] if outcome.error else "",
        )


def _stopped_because(running: RunningJob, outcome: Outcome) -> str | None:
    """Why the worker stopped the job, if its report is to hand it back."""
    if outcome.status is Status.LEASE_EXPIRED:
        return StopReason.LEASE_GONE  # handed back: no fault of the job's
    if running.stopped_because == StopReason.SERVED_ELSEWHERE:
        return StopReason.SERVED_ELSEWHERE  # refused unrun, for a worker that serves it
    # Only a job we killed is handed back: one that finished as it was being
    # stopped has a real outcome. Read once: a heartbeat racing this report
    # may mark the job lost afterwards.
    return running.stopped_because if outcome.status is Status.CANCELLED else None


def _saying_why(outcome: Outcome, stopped: str | None) -> Outcome:
    """``outcome`` with an error that says why the worker stopped the job, if it did.

    The sandbox that killed the job knows only that the worker asked it to;
    the worker knows why (a cancel, a drain, a lost lease...).
    """
    if stopped is None or outcome.status is not Status.CANCELLED or outcome.error is None:
        return outcome
    # A job stopped before its code started has no wall time.
    end = "killed" if outcome.wall_seconds > 0 else "it had not started"
    error = error_info(outcome.error["type"], f"{STOPPED_WORDS[stopped]}; {end}")
    return msgspec.structs.replace(outcome, error=error)
