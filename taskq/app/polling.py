"""The pause between polls, which an action can cut short.

A poll loop fetches, posts what it got, then sleeps here; the next fetch is
booked only after the previous one finished, so polls never pile up on a slow
store. After the user acts (cancel, pause...), :meth:`Ticker.wake_all` ends
every loop's sleep at once, so the change shows without waiting a full
interval.

A poll that took long (a text filter scanning a million jobs) sleeps longer
before the next one, so the console never keeps the store busy.
"""

from __future__ import annotations

import asyncio
import contextlib


class Ticker:
    """Sleeps of a set interval that :meth:`wake_all` ends early."""

    def __init__(self, interval: float) -> None:
        if not interval > 0:
            raise ValueError(f"the refresh interval must be positive seconds, got {interval}")
        self.interval = interval
        self._wake = asyncio.Event()

    async def sleep(self, at_least: float = 0.0) -> None:
        """Wait one interval (or ``at_least`` if longer), less if :meth:`wake_all` is called."""
        wake = self._wake
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), max(self.interval, at_least))

    def wake_all(self) -> None:
        """End every current sleep now; later sleeps wait a full interval again."""
        self._wake.set()
        self._wake = asyncio.Event()
