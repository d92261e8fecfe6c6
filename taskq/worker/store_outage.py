"""Telling the event log once that the store stopped answering, and once that it is back.

Every loop of a worker meets the same outage: the claimer, the heartbeat and
the acknowledgements each fail every few hundred milliseconds while a disk is
full or a cluster has no leader. An event per failure would bury the cause,
so the outage is told once (again only if its cause changes kind, say from a
full disk to a damaged file) and its end once. A full disk still answers
reads, so only a write can say the store is back: the heartbeat's.
"""

from __future__ import annotations

import time

from taskq import errors
from taskq.worker.events import EventLog


class StoreOutage:
    """Whether the store is failing this worker now, told to ``events`` as it changes."""

    def __init__(self, events: EventLog, worker_id: str) -> None:
        self._events = events
        self._worker_id = worker_id
        self._since: float | None = None
        self._kind: type[errors.StoreError] | None = None
        self._failures = 0

    def failed(self, exc: errors.StoreError) -> None:
        """A request failed: the first failure of an outage (or of a new kind) is told."""
        if self._since is None:
            self._since = time.monotonic()
        self._failures += 1
        if type(exc) is not self._kind:
            self._kind = type(exc)
            self._events.emit(
                "store_unavailable",
                worker=self._worker_id,
                kind=type(exc).__name__,
                error=str(exc),
            )

    def written(self) -> None:
        """A write went through: an outage, if there was one, is over."""
        if self._since is None:
            return
        self._events.emit(
            "store_recovered",
            worker=self._worker_id,
            seconds=round(time.monotonic() - self._since, 1),
            failures=self._failures,
        )
        self._since = None
        self._kind = None
        self._failures = 0
