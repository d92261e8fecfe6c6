"""Idle workers of one store on one machine looking for work in turn, not all at once.

Every idle worker of an SQLite store hears of each commit (``wal_watch``),
so one submit wakes them all. Each would read whether a job waits, find it,
and send a claim: one claim takes the job, and the others wait for the write
lock and then commit a claim of nothing, with its fsync, while the first
worker hands the job to its child. With two idle workers on two cores, that
second claim made a pickup half as slow again (traced, issue 44).

So an idle worker claims while it holds a turn: an advisory lock (``flock``)
on the store's directory, which every process on the machine sees. It reads
first, without the turn, and takes the turn only if the read found work it
could claim (:meth:`LookTurns.turn_if_free`): a look that finds nothing, as
a worker's whose queues the commit did not touch, holds up nobody. A worker
that finds the turn taken waits until it is free (:meth:`LookTurns.turn`) and
then looks again: by then the claim of the worker that held it has
committed, so its read finds the job gone, and no write follows, or finds
what is left.

On rqlite a hint wakes the idle workers of every machine, each reads, and
each sends a claim: a write by quorum, which the nodes apply on the cores
the workers share (a second idle worker on one machine added 0.9 writes to
every pickup, traced). There the turn of one machine's workers of one
cluster is a lock file named after its nodes, in a folder only the user can
enter (:func:`cluster_turns`), and a look made after another's reads the
leader's copy (``fresh``), since a follower's may not have the other's
claim yet. Workers on other machines look as before.

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
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio

from taskq.turn_folder import try_lock, turn_folder

# A look and its claim take a couple of milliseconds; a disk's stall, some tens.
_LONGEST_WAIT_SECONDS = 0.05
# The event loop's timers have a millisecond's grain (see wal_watch).
_RETRY_SECONDS = 0.001


class LookTurns:
    """The turn of the idle workers that lock ``path``, a folder or a file (see module doc)."""

    def __init__(self, path: Path | None, *, create: bool = False) -> None:
        """Turns on the lock at ``path``; None: no turns, every look claims at once."""
        self._fd: int | None = None
        if path is None:
            return
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        # A store's folder that cannot be opened: the store's own calls will say what is wrong.
        with contextlib.suppress(OSError):
            self._fd = os.open(path, flags, 0o600)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[bool]:
        """Hold the turn while in the block; enter without it if it is not had in time.

        The block is given whether another worker held the turn first: its
        look, and perhaps its claim, has just been made.
        """
        held, waited = await self._take()
        try:
            yield waited
        finally:
            if held:
                self._give_back()

    @contextlib.contextmanager
    def turn_if_free(self) -> Iterator[bool]:
        """Hold the turn while in the block if no other look holds it now.

        The block is given whether the look may claim: False only while
        another holds the turn (wait for it with :meth:`turn`, then look
        again); True where there are no turns to take.
        """
        held = self._try()
        if held is None:
            yield False
            return
        try:
            yield True
        finally:
            if held:
                self._give_back()

    async def _take(self) -> tuple[bool, bool]:
        """Whether the turn was had, and whether another held it first."""
        deadline = time.monotonic() + _LONGEST_WAIT_SECONDS
        waited = False
        while (held := self._try()) is None:
            waited = True
            if time.monotonic() >= deadline:
                return False, waited
            await anyio.sleep(_RETRY_SECONDS)
        return held, waited

    def _try(self) -> bool | None:
        """Take the turn if free: whether it is held now, None while another holds it.

        False where there are no turns to take (no folder, no ``flock``).
        """
        if self._fd is None:
            return False
        return try_lock(self._fd)

    def _give_back(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def cluster_turns(nodes: Sequence[str]) -> LookTurns:
    """The turn of this machine's idle workers of the cluster of ``nodes``, in any order.

    A lock file named after the nodes in the user's turn folder
    (:func:`taskq.turn_folder.turn_folder`); where the user has none of their
    own, the workers look without turns.
    """
    import hashlib  # Imported here: a command that never looks has no use for it

    folder = turn_folder()
    if folder is None:
        return NO_TURNS
    digest = hashlib.sha256("\n".join(sorted(nodes)).encode()).hexdigest()[:16]
    return LookTurns(folder / f"rqlite-{digest}.turn", create=True)


@runtime_checkable
class TurnTakingStore(Protocol):
    """A store whose idle workers on one machine look in turn."""

    def look_turns(self) -> LookTurns:
        """The turn of this store's idle workers to claim (see :class:`LookTurns`)."""
        ...


NO_TURNS = LookTurns(None)
"""The turns of a store whose idle workers take none: every look claims at once."""


def look_turns_of(store: object) -> LookTurns:
    """The turns to claim on ``store``; :data:`NO_TURNS` for a store without them."""
    return store.look_turns() if isinstance(store, TurnTakingStore) else NO_TURNS
