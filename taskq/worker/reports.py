"""What a worker tells the store about one attempt, from the attempt's outcome."""

from __future__ import annotations

import msgspec

from taskq.broker.ops.leases import Report, ReportKind
from taskq.broker.ops.output import AttemptOutput
from taskq.broker.records import HANDED_BACK_ERROR, AttemptReport, ClaimedJob
from taskq.job_context import JobUpdate
from taskq.retry import DEFAULT_RETRY, Retry, RetryPolicy, exception_name, parse_retry
from taskq.worker.running import StopReason
from taskq.worker.sandbox.outcome import Outcome, Status, error_info

_RETRY = exception_name(Retry)
# Statuses that will come out the same on another try: fail without retrying.
_NOT_RETRYABLE = {Status.RESULT_INVALID, Status.POLICY}
# Stopped by the worker for its own reasons, not the job's: the attempt was not used.
_HANDED_BACK = {StopReason.DRAIN, StopReason.HAND_BACK, StopReason.SERVED_ELSEWHERE}
SERVED_ELSEWHERE_DELAY = 1.0
"""How long a job refused here waits, queued, for a worker that serves it: were it
claimable at once, this worker's next claim (in its very report's write) would
take it back."""


def report_of(
    job: ClaimedJob,
    stopped: str | None,
    outcome: Outcome,
    checkpoint_json: str | None = None,
    progress: JobUpdate | None = None,
    waited_seconds: float | None = None,
    output: AttemptOutput | None = None,
) -> Report:
    """What to tell the store about one attempt (``stopped``: why we killed it, if we did).

    A failure is judged by the job's retry policy: whether it is retried, and
    when. ``checkpoint_json`` is what the attempt last saved, if anything:
    it goes with the report, so that an attempt that dies right after saving
    leaves it for the next one. ``progress``, what the job last said, goes
    with it too: the progress forwarder may not have sent it before the job
    ended. The attempt's record says ``released`` for a job handed back by a
    drain, or handed back unstarted for another worker. ``waited_seconds``
    is the time from the claim to the job's start; the outcome's wall time is
    its run. ``output`` is what the attempt wrote that the store does not have
    yet: it goes with the report, fenced by the same lease.
    """
    report = _judged(job, stopped, outcome, checkpoint_json, waited_seconds)
    if progress is not None:
        report = msgspec.structs.replace(
            report, progress=progress.fraction, progress_message=progress.message
        )
    if output is not None:
        report = msgspec.structs.replace(report, output=output)
    return report


def _judged(
    job: ClaimedJob,
    stopped: str | None,
    outcome: Outcome,
    checkpoint_json: str | None,
    waited_seconds: float | None,
) -> Report:
    lease = job.lease
    attempt = AttemptReport(
        outcome="released" if stopped in _HANDED_BACK else outcome.status.value,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        peak_rss_bytes=outcome.peak_rss_bytes or None,
        cpu_seconds=outcome.cpu_seconds,
        waited_seconds=waited_seconds,
        ran_seconds=outcome.wall_seconds,
    )
    if stopped == StopReason.SERVED_ELSEWHERE:
        # Not run: the refusal goes on the attempt's record, the job to a worker that serves it.
        return Report(
            lease,
            ReportKind.RELEASE,
            attempt,
            error=dict(outcome.error or error_info("PolicyRefused", "")),
            retry_delay=SERVED_ELSEWHERE_DELAY,
        )
    if stopped is not None:
        # We stopped it: hand it back. A cancel request ends it cancelled; a
        # lease that moved on refuses, and whatever the job produced is dropped.
        # Why (a drain, a job claimed ahead and not started in time) goes on the
        # attempt's record, so that a run not counted says why it ran again.
        why = dict(outcome.error) if outcome.error else None
        if why is not None and stopped in _HANDED_BACK:
            why["type"] = HANDED_BACK_ERROR  # the sandbox's "Cancelled" would say otherwise
        return Report(
            lease, ReportKind.RELEASE, attempt, error=why, checkpoint_json=checkpoint_json
        )
    if outcome.status is Status.SUCCEEDED:
        # The child's own encoding, checked on arrival (see ``judging``): stored as it is.
        # Jobs it spawned are written with its success, fenced by the same lease.
        return Report(
            lease,
            ReportKind.COMPLETE,
            attempt,
            result_json=outcome.result_json,
            spawn=outcome.spawn,
        )
    info = dict(outcome.error or error_info("Error", outcome.status.value))
    failure = {
        "type": info.get("type", "Error"),
        "message": info.get("message", ""),
        "traceback": info.get("traceback", ""),
        "status": outcome.status.value,
    }
    policy = _policy_of(job)
    retryable = outcome.status not in _NOT_RETRYABLE and outcome.give_up != "permanent"
    asked_again = _RETRY in outcome.lineage  # a Retry asks for one whatever the lists say
    if retryable and outcome.lineage and not outcome.give_up and not asked_again:
        # An exception of the job's own: its policy names those worth another try.
        retryable = policy.retries(outcome.lineage)
    if outcome.give_up:
        failure["gave_up"] = outcome.give_up
    delay = outcome.retry_after if outcome.retry_after is not None else policy.delay(job.attempt)
    return Report(
        lease,
        ReportKind.FAIL,
        attempt,
        error=failure,
        retryable=retryable,
        retry_delay=delay,
        give_up=outcome.give_up == "abort",
        checkpoint_json=checkpoint_json,
    )


def _policy_of(job: ClaimedJob) -> RetryPolicy:
    if job.retry is None:
        return DEFAULT_RETRY
    try:
        return parse_retry(job.retry)
    except ValueError:
        # Checked at enqueue; a policy this worker cannot read is no reason to lose the job.
        return DEFAULT_RETRY
