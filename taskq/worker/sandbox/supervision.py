"""What watching a job saw: why it stopped, and what ``judging`` needs to name its outcome.

Every child is watched from the event loop (``pool_child``), a pool child
that runs job after job as much as a fresh one that runs one; either way
each job ends in a ``Supervised``.
"""

from __future__ import annotations

import enum

import msgspec

from taskq.worker.sandbox import keeper, protocol
from taskq.worker.sandbox.child_process import ChildProcess, Ended


class EndReason(enum.Enum):
    """Why watching a job stopped."""

    EXITED = "exited"
    """The child exited (or died) by itself."""
    REPORTED = "reported"
    """A pool child sent its result and lives on for the next job."""
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"
    """The child's keeper killed the job: its lease was not renewed in time."""
    CPU_LIMIT = "cpu_limit"
    """The child's keeper killed the job: it used more CPU time than it was given."""
    OUTPUT_LIMIT = "output_limit"
    PROTOCOL_ERROR = "protocol_error"
    NOT_STARTED = "not_started"
    """A job queued in a pool child never started: withdrawn, refused, or the child ended first."""


class Supervised(msgspec.Struct, frozen=True):
    """What watching a job saw; ``decide_outcome`` turns it into an ``Outcome``."""

    reason: EndReason
    report: protocol.ChildReport | None
    ended: Ended | None
    """How the child ended; ``None`` when a pool child lives on."""
    cpu_seconds_at_start: float | None
    """The child's CPU time when the job started, to subtract from its lifetime's."""
    output_bytes: int
    log_tail: str
    wall_seconds: float
    protocol_error: str = ""
    stdout: str | None = None
    """A command's stdout apart (a ``shell`` job's): its end, at most the result's size."""
    stdout_truncated: bool = False


def keeper_reason(child: ChildProcess, otherwise: EndReason) -> EndReason:
    """Why a child ended, when its keeper ended it (see ``keeper``); else ``otherwise``."""
    said = child.ended_by_keeper()
    if said == keeper.LEASE_ENDED:
        return EndReason.LEASE_EXPIRED
    if said == keeper.WALL_CLOCK_ENDED:
        return EndReason.TIMEOUT
    if said == keeper.CPU_ENDED:
        return EndReason.CPU_LIMIT
    return otherwise
