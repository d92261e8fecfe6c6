"""What the paged views (jobs, workflows) share: keyset cursors, and the poll of the page shown."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from taskq.app.console import Console
from taskq.app.source import SOURCE_ERRORS, describe_error

T = TypeVar("T")


class KeysetCursors:
    """Where a keyset-paged view is: its newest page, or older than the last id of
    each page walked before the one shown."""

    def __init__(self) -> None:
        self._cursors: list[int | None] = [None]

    @property
    def before(self) -> int | None:
        """The keyset of the page shown (None: the newest page)."""
        return self._cursors[-1]

    @property
    def page_number(self) -> int:
        return len(self._cursors)

    def reset(self) -> None:
        """Back to the newest page."""
        self._cursors = [None]

    def step(self, step: int, last_id: int | None) -> str | None:
        """Move one page older (``step`` > 0) or newer; what to tell the reader instead when
        there is no such page. ``last_id``: the last id of the page shown, None when that
        page is the oldest (or not read yet)."""
        if step > 0:
            if last_id is None:
                return "This is the oldest page."
            self._cursors.append(last_id)
        elif len(self._cursors) == 1:
            return "This is the newest page."
        else:
            self._cursors.pop()
        return None


async def poll_pages(
    console: Console, origin: str, fetch: Callable[[], Awaitable[T]], post: Callable[[T], object]
) -> None:
    """Fetch the page shown, post it, sleep; again until cancelled.

    A store error goes to the banner as ``origin``'s problem, until a fetch
    succeeds. A fetch that took long (a text filter, big workflows' counts)
    sleeps longer: at most a third of the time goes to asking the store.
    """
    while True:
        started = time.monotonic()
        try:
            page = await fetch()
        except SOURCE_ERRORS as exc:
            console.report_problem(origin, describe_error(exc))
        else:
            console.report_problem(origin, None)
            post(page)
        await console.ticker.sleep(at_least=2 * (time.monotonic() - started))
