"""The console's clock: ages and times shown relative to an injectable now.

Tests and snapshots fix ``now`` and the time zone, so what the console shows
does not change between runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from taskq.app import formatting


@dataclass(frozen=True, slots=True)
class Clock:
    """Where "now" comes from, and the zone absolute times are shown in (local by default)."""

    now: Callable[[], float] = field(default=time.time)
    tz: tzinfo | None = None

    def ago(self, moment: float | None) -> str:
        """How long ago ``moment`` was, e.g. ``3m12s``; a future moment reads ``in 5s``."""
        if moment is None:
            return "-"
        delta = self.now() - moment
        if delta < 0:
            return f"in {formatting.duration(-delta, precise=False)}"
        return formatting.duration(delta, precise=False)

    def at(self, moment: float | None) -> str:
        """``moment`` as a date and time to the second, in the clock's zone."""
        if moment is None:
            return "-"
        return datetime.fromtimestamp(moment, self.tz).strftime("%Y-%m-%d %H:%M:%S")
