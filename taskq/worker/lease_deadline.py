"""When a worker's jobs must be dead by, unless their leases are renewed first.

The store lets another worker claim a job once its lease has expired by the
store's clock. So that a job never runs twice at once, the worker's side
must have stopped it by then, even when the worker cannot act (frozen,
partitioned, its store unreachable). Each sandbox child's keeper holds a
deadline and kills the child's jobs when it passes, on its own monotonic
clock; this object computes that deadline and sends it to every keeper.

The argument, for one lease of ``L`` seconds renewed by a request the worker
sent at monotonic time ``s`` (a claim, or a heartbeat that renewed it):

- the store writes ``lease_until = now_store + L``, where ``now_store`` is read
  while the request is applied, which happens after it was sent: in real
  time, the lease runs at least until ``s + L`` (give or take the store
  nodes' clock error ``e``: on rqlite, the leader that applied the write
  reads its wall clock, and a later leader's clock may run ahead of it);
- the keeper kills the job at ``s + L - m`` by the same machine's monotonic
  clock, which cannot jump, and a kill takes a few milliseconds ``k``;
- so the job is dead before the lease expires whenever ``m > e + k``. The
  margin ``m`` (``lease_margin_seconds``, 2 s by default) bounds the clock
  error between store nodes that taskq tolerates; NTP keeps it to
  milliseconds. The rate difference between clocks (NTP slews at most
  500 ppm, 15 ms over a 30 s lease) is part of it.

One deadline serves all of a worker's jobs: the oldest renewal among the
leases it holds plus ``L - m``. It is sent when it moves earlier (a first
lease after none), when it moves later by ``_SEND_STEP_SECONDS`` or more (a
renewal), and as ``inf`` when no lease is held; a later deadline sent late
only ends jobs early, never late. Heartbeats come every ``H`` seconds, and
``2H + m <= L`` (checked in the settings) so that one lost heartbeat costs
no job.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol

# Later deadlines go out at most this often (they are never urgent, and a
# busy worker's oldest lease moves on with every batch it claims).
_SEND_STEP_SECONDS = 0.5


class Keeper(Protocol):
    """What a deadline is sent to: a sandbox child's keeper."""

    def set_deadline(self, kill_by: float) -> None: ...


class LeaseDeadline:
    """The monotonic time this worker's jobs must be dead by; ``inf`` while it holds no lease.

    Keepers are added from the threads that start children and the deadline
    moves in the event loop's thread: a lock keeps each keeper's view whole.
    """

    def __init__(self, *, lease_seconds: float, margin_seconds: float) -> None:
        self._lasts = lease_seconds - margin_seconds
        self._kill_by = math.inf
        self._keepers: set[Keeper] = set()
        self._lock = threading.Lock()

    @property
    def kill_by(self) -> float:
        return self._kill_by

    def expired(self) -> bool:
        """Whether the deadline has passed: a job started now would be killed at once."""
        return time.monotonic() >= self._kill_by

    def claimed(self, sent_at: float) -> None:
        """Leases were claimed by a request sent at ``sent_at`` (monotonic)."""
        if self._kill_by == math.inf:
            self._move(sent_at + self._lasts)
        # else the deadline already comes from an older lease, which expires first.

    def held_since(self, oldest_renewal: float | None) -> None:
        """The oldest renewal among the leases held now (``None``: none is held)."""
        kill_by = math.inf if oldest_renewal is None else oldest_renewal + self._lasts
        # inf - a finite deadline is inf: dropping the deadline always goes out.
        if kill_by < self._kill_by or kill_by - self._kill_by >= _SEND_STEP_SECONDS:
            self._move(kill_by)

    def attach(self, keeper: Keeper) -> None:
        """Send ``keeper`` the deadline now and whenever it moves, until ``detach``."""
        with self._lock:
            self._keepers.add(keeper)
            keeper.set_deadline(self._kill_by)

    def detach(self, keeper: Keeper) -> None:
        with self._lock:
            self._keepers.discard(keeper)

    def _move(self, kill_by: float) -> None:
        with self._lock:
            self._kill_by = kill_by
            for keeper in self._keepers:
                keeper.set_deadline(kill_by)
