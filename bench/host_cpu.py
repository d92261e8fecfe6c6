"""Where the machine's CPU time went while a figure was measured, steal included.

On a virtual machine the host may run other guests on the same cores: the
time it takes from this one is counted as *steal* in ``/proc/stat``. On the
2-core Xeon a first-result bench ran 233-494 ms (p50 319) while 22% of the
machine's time was stolen, against 217-255 ms (p50 241) an hour before: a
figure that moved with nothing in taskq changed is told apart from a
regression by the steal beside it.

``shares(before, after)`` gives each kind of time as a fraction of all the
machine's time between two ``read()`` snapshots; the bench writes the steal
and idle shares beside each figure it measures and over its whole run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The first line of /proc/stat: "cpu" and the machine's times in clock ticks,
# in this order (proc(5)); guest time is already counted in user time.
KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU times since boot, in clock ticks, by kind (``KINDS``)."""

    ticks: tuple[int, ...]


def parse(stat_text: str) -> CpuTimes:
    """The machine-wide times of a ``/proc/stat`` text (its first line)."""
    fields = stat_text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        raise ValueError("not a /proc/stat text: its first line is not the machine's cpu line")
    # A kernel older than a kind counts none of it (steal came with 2.6.11).
    values = [int(value) for value in fields[1 : 1 + len(KINDS)]]
    return CpuTimes(tuple(values + [0] * (len(KINDS) - len(values))))


def read() -> CpuTimes | None:
    """The times now; None where there is no ``/proc/stat``."""
    try:
        return parse(STAT.read_text())
    except (OSError, ValueError):
        return None


def shares(before: CpuTimes | None, after: CpuTimes | None) -> dict[str, float]:
    """Each kind's fraction of the machine's time between the two; empty when none passed."""
    if before is None or after is None:
        return {}
    spent = [now - then for then, now in zip(before.ticks, after.ticks, strict=True)]
    total = sum(spent)
    if total <= 0:
        return {}
    return {kind: ticks / total for kind, ticks in zip(KINDS, spent, strict=True)}


# A figure added sooner than this after the last (a p99 beside its p50) is
# given the shares of the measure before it: the clock ticks of /proc/stat
# are 10 ms apart.
MEASURE_SECONDS = 0.1


class HostWindow:
    """The shares of the measure just taken, for each figure a bench adds after it.

    Each call ends a window begun at the last one that ended a window, if it
    lasted :data:`MEASURE_SECONDS` or more; figures added together after one
    measure are given its shares alike, and a window ended before a measure
    leaves out what came before it.
    """

    def __init__(
        self,
        snapshot: Callable[[], CpuTimes | None] = read,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._snapshot, self._clock = snapshot, clock
        self._start = snapshot()
        self._started = clock()
        self._last: dict[str, float] = {}

    def shares_of_last_measure(self) -> dict[str, float]:
        """``host_steal`` and ``host_idle``: fractions of the machine's time, rounded."""
        if self._clock() - self._started >= MEASURE_SECONDS:
            now = self._snapshot()
            found = shares(self._start, now)
            self._last = (
                {"host_steal": round(found["steal"], 3), "host_idle": round(found["idle"], 3)}
                if found
                else {}
            )
            self._start, self._started = now, self._clock()
        return dict(self._last)
