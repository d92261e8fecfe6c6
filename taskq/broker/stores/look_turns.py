"""Idle workers of one embedded store looking for work in turn, not all at once.

Every idle worker of an SQLite store hears of each commit (``wal_watch``),
so one submit wakes them all. Each would read whether a job waits, find it,
and send a claim: one claim takes the job, and the others wait for the write
lock and then commit a claim of nothing, with its fsync, while the first
worker hands the job to its child. With two idle workers on two cores, that
second claim made a pickup half as slow again (traced, issue 44).

So an idle worker looks while it holds a turn: an advisory lock (``flock``)
on the store's directory, which every process on the machine sees. A worker
that finds the turn taken waits until it is free and then looks: by then the
claim of the worker that held it has committed, so its read finds the job
gone, and no write follows, or finds what is left.

The turn only saves work; nothing depends on it. A worker that cannot have it
within :data:`_LONGEST_WAIT_SECONDS` (its holder frozen, say), or whose
filesystem has no ``flock``, looks anyway, as every worker did before; a dead
holder's lock goes with its process. Stores in one directory share the turn,
so a look may wait for one of another store's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio

# A look and its claim take a couple of milliseconds; a disk's stall, some tens.
_LONGEST_WAIT_SECONDS = 0.05
# The event loop's timers have a millisecond's grain (see wal_watch).
_RETRY_SECONDS = 0.001


class LookTurns:
    """The turn of the idle workers of the stores in ``folder`` (see module doc)."""

    def __init__(self, folder: Path) -> None:
        self._fd: int | None
        try:
            self._fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # the store's own calls will say what is wrong with the folder
            self._fd = None

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the turn while in the block; enter without it if it is not had in time."""
        held = await self._take()
        try:
            yield
        finally:
            if held:
                self._give_back()

    async def _take(self) -> bool:
        deadline = time.monotonic() + _LONGEST_WAIT_SECONDS
        while self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
            except OSError:  # no flock on this filesystem
                return False
            await anyio.sleep(_RETRY_SECONDS)
        return False

    def _give_back(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@runtime_checkable
class TurnTakingStore(Protocol):
    """A store whose idle workers look in turn (the embedded store's; a cluster's do not)."""

    def look_turn(self) -> AbstractAsyncContextManager[None]:
        """Hold the idle workers' turn to look while in the block (see module doc)."""
        ...


def look_turn_of(store: object) -> AbstractAsyncContextManager[None]:
    """The turn to look on ``store``; for a store without turns, a block that waits for none."""
    if isinstance(store, TurnTakingStore):
        return store.look_turn()
    return contextlib.nullcontext()
