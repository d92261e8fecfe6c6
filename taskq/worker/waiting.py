"""Waiting for the first of several events, as the worker's loops do between rounds."""

from __future__ import annotations

import anyio


async def first_of(*events: anyio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with anyio.create_task_group() as waits:

        async def until(event: anyio.Event) -> None:
            await event.wait()
            waits.cancel_scope.cancel()

        for event in events:
            waits.start_soon(until, event)
