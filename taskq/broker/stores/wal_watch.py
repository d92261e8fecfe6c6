"""Seeing another process's commit to an SQLite file within a fraction of a millisecond.

An idle worker waits for the store to change. SQLite pushes nothing, but a
commit in WAL mode writes its pages to the ``-wal`` file beside the database,
and on Linux inotify tells of such a write without any polling. The write
comes before the commit's fsync and before the commit is visible, so on a
write the watcher looks at ``PRAGMA data_version`` (which moves when any
connection commits, and costs a read of shared memory) from a tenth of a
millisecond on until it moves (see :data:`_SETTLE_SECONDS`). Where inotify
is missing (another system, a full inotify limit) the watcher polls
``data_version`` every :data:`_FALLBACK_POLL_SECONDS` instead.

The watcher lives as long as its store: one connection and one inotify
descriptor, not one per wait. Writes made between two waits stay queued in
the descriptor, and the watcher remembers the version its last wait ended
on, so a commit made while the caller was busy looking ends the next wait at
once instead of being missed. A spurious wake-up only costs the caller one
cheap look; a missed one costs it a whole idle interval.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    import asyncinotify

_FALLBACK_POLL_SECONDS = 0.001
# After a write to the WAL the watcher looks for the commit to show every
# 0.05 ms for as long as a commit's fsync usually takes (0.4-1 ms here), then
# less and less often, for up to 20 ms. Pauses that grew from the first look
# on saw a commit 0.1-0.3 ms after it showed (pickups 0.07-0.12 ms sooner at
# the median without them, 10 blocks of 150 in turn). Events come for each
# write of a commit, so some arrive after the commit they belong to has been
# seen; such a late event costs some dozens of looks, not a spinning thread.
_SETTLE_PAUSE_SECONDS = 0.00005
_STEADY_SETTLE_SECONDS = 0.002
_SETTLE_SECONDS = 0.02


class WalWatcher:
    """Waits for commits to the SQLite file at ``path``, from any process (see module doc)."""

    def __init__(self, path: Path) -> None:
        self._wal_name = path.name + "-wal"
        self._conn = sqlite3.connect(path, timeout=1.0, check_same_thread=False)
        self._conn_lock = threading.Lock()
        self._busy = threading.Lock()
        self._seen = self._version()
        self._inotify = _watch_directory(path.parent)

    @property
    def uses_inotify(self) -> bool:
        return self._inotify is not None

    async def wait(self, timeout: float) -> None:
        """Return once a commit has shown since the last wait returned, or after ``timeout``."""
        # The descriptor has one reader at a time; a second waiter at once polls.
        if not self._busy.acquire(blocking=False):
            await self._poll_for_change(timeout, self._version())
            return
        try:
            with anyio.move_on_after(timeout):
                if self._inotify is None:
                    await self._poll_for_change(timeout, self._seen)
                else:
                    await self._wait_for_commit(self._inotify)
            self._seen = self._version()
        finally:
            self._busy.release()

    async def _wait_for_commit(self, inotify: asyncinotify.Inotify) -> None:
        while self._version() == self._seen:
            await anyio.wait_readable(inotify.fd)
            if not self._wal_written(inotify):
                continue
            # In a thread: the event loop's timers (uvloop's) have a
            # millisecond's grain, and a shorter sleep there spins.
            if not await anyio.to_thread.run_sync(self._settle, self._seen, abandon_on_cancel=True):
                # Not shown yet: a very slow fsync, or a late event of a commit
                # already seen. Polling until the wait ends misses neither.
                await self._poll_for_change(math.inf, self._seen)

    def _wal_written(self, inotify: asyncinotify.Inotify) -> bool:
        """Read every queued event; whether one was a write to this store's WAL."""
        written = False
        while (event := inotify.sync_get()) is not None:
            written = written or event.name is None or event.name.name == self._wal_name
        return written

    def _settle(self, since: int) -> bool:
        """Wait briefly for a write to the WAL to show as a commit; whether it did."""
        start = time.monotonic()
        pause = _SETTLE_PAUSE_SECONDS
        while (now := time.monotonic()) < start + _SETTLE_SECONDS:
            if self._version() != since:
                return True
            time.sleep(pause)
            if now > start + _STEADY_SETTLE_SECONDS:
                pause = min(pause * 1.5, _FALLBACK_POLL_SECONDS)
        return False

    async def _poll_for_change(self, seconds: float, since: int) -> None:
        deadline = time.monotonic() + seconds
        while self._version() == since and time.monotonic() < deadline:
            await anyio.sleep(_FALLBACK_POLL_SECONDS)

    def _version(self) -> int:
        try:
            with self._conn_lock:
                return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            # Locked or gone for a moment: a changed value wakes the caller to look.
            return -1

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        with self._conn_lock:
            self._conn.close()


def _watch_directory(folder: Path) -> asyncinotify.Inotify | None:
    """An inotify descriptor told of writes to files in ``folder``; None where there is none.

    The folder, not the WAL file: SQLite deletes the WAL when the last
    connection closes and makes a new one on the next write.
    """
    # Imported here, by a process that waits: importing asyncinotify looks its C
    # library up with ``ldconfig`` in a subprocess, which no client, console or
    # CLI command that merely opens the store should pay for.
    try:
        import asyncinotify
    except (ImportError, OSError, AttributeError):  # not Linux, or no inotify in its libc
        return None
    inotify = None
    try:
        inotify = asyncinotify.Inotify(sync_timeout=0)
        inotify.add_watch(folder, asyncinotify.Mask.MODIFY | asyncinotify.Mask.CREATE)
    except OSError:  # no inotify here, or its watch limit reached
        if inotify is not None:
            with contextlib.suppress(OSError):
                inotify.close()
        return None
    return inotify
