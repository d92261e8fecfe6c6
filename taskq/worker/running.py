"""A job a worker holds, from its claim until the store has its report, and why it was stopped."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio

from taskq.broker.records import ClaimedJob
from taskq.worker.progress import Progress
from taskq.worker.stopping import StopRequest


class StopReason:
    """Why a running job was stopped by the worker rather than finishing."""

    LEASE_GONE = "lease_gone"  # cancelled by a user, or the lease expired
    DRAIN = "drain"  # the grace period of a shutdown ran out


@dataclass
class RunningJob:
    job: ClaimedJob
    renewed_at: float
    """When the request that last renewed its lease (or claimed it) was sent: monotonic."""
    cancel: StopRequest = field(default_factory=StopRequest)
    stopped_because: str | None = None
    started: float = field(default_factory=time.monotonic)
    progress: Progress | None = None
    progress_changed: anyio.Event | None = None  # set up by the job's first progress report
    reporting: bool = False  # the outcome is being reported: the report's fencing decides
    queued: bool = False  # handed to a pool child behind another job: claimed ahead, in effect

    def stop(self, reason: str) -> None:
        if self.stopped_because is None:
            self.stopped_because = reason
        self.cancel.set()
