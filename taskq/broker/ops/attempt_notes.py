"""What a job's record tells of its attempts, each told in a clause of one line: for the
error of a wait that ran out and for that of a job that ended cancelled."""

from __future__ import annotations

import time
from typing import Any

from taskq import humanize
from taskq.broker.records import Job, JobState

ERROR_MESSAGE_CHARS = 100
"""How much of an error's message a note keeps: the whole error stays on the job's record."""

PARENT_FAILED = "ParentFailed"
"""The type of the error a cancel that cascaded from a parent leaves (dependencies.sql)."""

CANCELLED = "Cancelled"
"""The type of the error a cancel by request leaves (jobs.sql, leases.sql)."""


def error_brief(error: dict[str, Any] | None) -> str:
    """``Type: message`` of ``error``, on one line: the first line of its message, clipped
    (a traceback or a long message would bury the rest of the line); "" for no error."""
    if not error:
        return ""
    lines = str(error.get("message") or "").strip().splitlines()
    message = humanize.clip(" ".join(lines[0].split()), ERROR_MESSAGE_CHARS) if lines else ""
    kind = str(error.get("type") or "Error")
    return f"{kind}: {message}" if message else kind


def last_attempt(job: Job) -> str:
    """How the job's latest attempt ended, by the error it left: ``attempt 1 failed
    (ValueError: bad input)``; ``attempt 1 ended`` where it left none."""
    brief = error_brief(job.error)
    return f"attempt {job.attempts} failed ({brief})" if brief else f"attempt {job.attempts} ended"


def next_attempt(job: Job, now: float) -> str | None:
    """For a queued job that ran before: how that ended and when its next attempt runs
    (``now``: the time to tell "runs at" from "was due at"). None for another job."""
    if job.state is not JobState.QUEUED or job.attempts == 0:
        return None
    when = "runs at" if job.run_at > now else "was due at"
    clock = _clock(job.run_at, now)
    return f"{last_attempt(job)}, {_attempt_of(job, job.attempts + 1)} {when} {clock}"


def cancelled(job: Job) -> str:
    """How a job that ended cancelled came to, as its record tells, after "ended cancelled".

    A cancel that cascaded from a parent leaves an error naming the parent; one
    asked of a running job leaves ``cancel_requested`` set, and its attempt
    counted; any other came while the job was queued or waiting, and its error
    says which (``cancelled by request while waiting``), unless an attempt before
    left one of its own, which the job keeps.
    """
    error = job.error or {}
    if error.get("type") == PARENT_FAILED:
        when = "before it ran" if job.attempts == 0 else f"after attempt {job.attempts}"
        return f"{when}: {PARENT_FAILED}: {error.get('message', '')}"
    if job.cancel_requested and job.attempts:
        brief = error_brief(job.error)
        return f"while running ({_attempt_of(job, job.attempts)})" + (
            f"; its last error: {brief}" if brief else ""
        )
    if job.attempts == 0:
        reason = error.get("message") if error.get("type") == CANCELLED else None
        return "before it ran" + (f": {reason}" if reason else "")
    return f"before attempt {job.attempts + 1} ran; {last_attempt(job)}"


def _attempt_of(job: Job, number: int) -> str:
    """``attempt 2 of 3``; ``attempt 2`` alone where the limit is not above it."""
    return f"attempt {number}" + (f" of {job.max_attempts}" if job.max_attempts >= number else "")


def _clock(at: float, now: float) -> str:
    """The local time of ``at``: ``14:03:07`` on the day of ``now``, with its date on another."""
    stamp = time.localtime(at)
    same_day = stamp[:3] == time.localtime(now)[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", stamp)
