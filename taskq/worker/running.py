"""A job a worker holds, from its claim until the store has its report, and why it was stopped."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping

import anyio
import msgspec

from taskq.broker.ops.output import AttemptOutput
from taskq.broker.records import ClaimedJob, Lease
from taskq.job_context import JobUpdate
from taskq.worker.held_output import HeldOutput
from taskq.worker.sandbox.stopping import StopRequest


class StopReason:
    """Why a running job was stopped by the worker rather than finishing."""

    LEASE_GONE = "lease_gone"  # the lease expired, or a cancel the heartbeat did not name
    CANCELLED = "cancelled"  # a user cancelled it, as the heartbeat said
    DRAIN = "drain"  # the grace period of a shutdown ran out
    HAND_BACK = "hand_back"  # claimed ahead, and no slot of ours started it in time
    # Refused by this worker's policy, and another live worker of its queue may run it.
    SERVED_ELSEWHERE = "served_elsewhere"


STOPPED_WORDS: Mapping[str, str] = {
    StopReason.LEASE_GONE: "stopped by the worker: its lease is gone (expired or taken back)",
    StopReason.CANCELLED: "stopped by the worker: a user cancelled it",
    StopReason.DRAIN: "handed back: the worker is draining",
    StopReason.HAND_BACK: "handed back: claimed ahead, no slot of the worker started it in time",
    StopReason.SERVED_ELSEWHERE: "handed back: refused here, for a worker that may run it",
}
"""Why the worker stopped a job, as its error says: the sandbox that killed it cannot tell."""


class RunningJob(msgspec.Struct):
    job: ClaimedJob
    renewed_at: float
    """When the request that last renewed its lease (or claimed it) was sent: monotonic."""
    cancel: StopRequest = msgspec.field(default_factory=StopRequest)
    claimed: float = msgspec.field(default_factory=time.monotonic)
    """When it was claimed (monotonic): a job claimed ahead goes back once it waited too long."""
    stopped_because: str | None = None
    started: float = msgspec.field(default_factory=time.monotonic)
    """When its slot handed it on, or it reached the head of its pool child's queue: monotonic."""
    progress: JobUpdate | None = None
    """What the job last said: forwarded while it runs, and sent with its report, so the
    last word of a job that ends before the forwarder sends it is kept."""
    progress_changed: anyio.Event | None = None  # set up by the job's first progress report
    ended: bool = False  # its run is over: the forwarder stops, the report carries the rest
    checkpoint_json: str | None = None
    """What this attempt last saved: it goes with the report too, so none is lost."""
    reporting: bool = False  # the outcome is being reported: the report's fencing decides
    queued: bool = False  # handed to a pool child behind another job: claimed ahead, in effect
    parents_file: str | None = None
    """Where its parents' outcomes were written for its child, until the job ends."""
    output: HeldOutput | None = None
    """What it wrote that the store does not have yet; None until it writes anything."""

    def unsent_output(self) -> AttemptOutput | None:
        """All of its output the store does not have yet, for its report to carry: it has ended."""
        return None if self.output is None else self.output.take(final=True)

    def drop_parents_file(self) -> None:
        """Delete the file of its parents' outcomes, if it has one: its child is done with it."""
        if self.parents_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.parents_file)
            self.parents_file = None

    def stop(self, reason: str) -> None:
        if self.stopped_because is None:
            self.stopped_because = reason
        self.cancel.set()


def note_renewals(
    held: Mapping[int, RunningJob], leases: list[Lease], lost: frozenset[Lease], sent_at: float
) -> None:
    """Note the leases a heartbeat sent at ``sent_at`` (monotonic) renewed: all but ``lost``."""
    for lease in leases:
        running = held.get(lease.job_id)
        if running is not None and running.job.lease == lease and lease not in lost:
            running.renewed_at = sent_at


def stop_expired(held: Mapping[int, RunningJob], lasts: float, now: float) -> float | None:
    """Stop the held jobs not renewed within ``lasts`` seconds; the oldest renewal of the rest.

    Their keepers have killed them, or are about to: stopped, they are handed
    back. ``None`` when no job still counts on its lease.
    """
    oldest: float | None = None
    for running in held.values():
        if running.stopped_because is not None or running.reporting:
            continue
        if running.renewed_at + lasts <= now:
            running.stop(StopReason.LEASE_GONE)
        elif oldest is None or running.renewed_at < oldest:
            oldest = running.renewed_at
    return oldest
