"""Seeing another process's commit to an SQLite file within a fraction of a millisecond.

An idle worker waits for the store to change. SQLite pushes nothing, so
every taskq process that writes to the file tells of each commit once it has
committed: it writes a byte to ``<store>-commits`` beside the database
(:class:`CommitMark`), and on Linux inotify tells the waiting processes of
that write without any polling. The watcher listens to that file alone while
every writer marks its commits: it wakes once a commit, when the commit
shows, and not at the commit's own writes to the ``-wal`` file, which come
before its fsync (two idle workers woken there take CPU from the writer
while its fsync waits).

A commit whose writer marks nothing (another program, a taskq older than the
mark) is seen all the same. While listening to the marks alone, the watcher
sees it when its wait ends at its timeout (a worker's idle poll, a second at
most) with the store changed; it then listens to the WAL's writes as well,
for :data:`_MARKS_TRIAL_SECONDS` after the last one that came unmarked. A
write to the WAL whose mark does not follow within :data:`_MARK_SECONDS`
makes the watcher look at ``PRAGMA data_version`` (which moves when any
connection commits, and costs a read of shared memory) until it moves or the
wait ends. Where inotify is missing (another system, a full inotify limit)
the watcher polls ``data_version`` every :data:`_FALLBACK_POLL_SECONDS`
instead.

The watcher lives as long as its store: one connection and one inotify
descriptor, not one per wait. Writes made between two waits stay queued in
the descriptor, and the watcher remembers the version its last wait ended
on, so a commit made while the caller was busy looking ends the next wait at
once instead of being missed. A spurious wake-up only costs the caller one
cheap look; a missed one costs it a whole idle interval.
"""

from __future__ import annotations

import contextlib
import enum
import math
import os
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
# How long a write to the WAL waits for its commit's mark before the watcher
# polls: a commit's fsync takes 0.4-1 ms here, a slow disk's some tens.
# Watchers polled for every commit before the mark (every 0.05 ms from its
# first write to the WAL until it showed): in a burst of 50 no-op jobs and
# their fan-in on 2 cores, each of two workers spent 5-7 ms of CPU a burst
# on it (sampled with py-spy), on cores the jobs' own work needed.
_MARK_SECONDS = 0.05
# Without a mark, the watcher looks for the commit to show every 0.05 ms for
# as long as a commit's fsync usually takes, then less and less often, for up
# to 20 ms.
_SETTLE_PAUSE_SECONDS = 0.00005
_STEADY_SETTLE_SECONDS = 0.002
_SETTLE_SECONDS = 0.02
_MARK_SUFFIX = "-commits"
# After a commit that came unmarked, the WAL's writes are listened to for this
# long past the last such commit, then the marks alone again.
_MARKS_TRIAL_SECONDS = 30.0


def commit_mark_path(store: Path) -> Path:
    """The file beside the SQLite file ``store`` whose writes tell of its commits."""
    return store.with_name(store.name + _MARK_SUFFIX)


class CommitMark:
    """A writer's half of the watch: a byte written to the mark file after each commit.

    The write changes nothing anyone reads; it exists for the inotify event
    it makes, which reaches the watchers once the commit can be seen. Where
    the file cannot be opened (a folder this user may only read) nothing is
    marked, and the watchers see the commits by polling (module doc).
    """

    def __init__(self, store: Path) -> None:
        self._store = store
        self._fd: int | None = None
        self._opened = False

    def tell(self) -> None:
        """Mark a commit: one byte, in place (under a microsecond)."""
        if not self._opened:
            # At the first commit: a process that only reads leaves no file behind.
            self._opened = True
            self._fd = self._open()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, b"\0", 0)

    def _open(self) -> int | None:
        try:
            # The database's own modes, as SQLite gives its -wal and -shm files:
            # every user who may write to the store may mark its commits.
            mode = self._store.stat().st_mode & 0o666
        except OSError:
            mode = 0o644
        try:
            return os.open(
                commit_mark_path(self._store), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, mode
            )
        except OSError:
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Heard(enum.Enum):
    """What a read of the inotify descriptor heard, the most telling first."""

    MARK = "a commit marked by its writer"
    WAL = "a write to the WAL"
    NOTHING = "only writes to other files"


class WalWatcher:
    """Waits for commits to the SQLite file at ``path``, from any process (see module doc)."""

    def __init__(self, path: Path) -> None:
        self._folder = path.parent
        self._wal_name = path.name + "-wal"
        self._mark_path = commit_mark_path(path)
        self._conn = sqlite3.connect(path, timeout=1.0, check_same_thread=False)
        self._conn_lock = threading.Lock()
        self._busy = threading.Lock()
        self._seen = self._version()
        self._inotify = _watch_directory(self._folder)
        self._mark_watch: asyncinotify.Watch | None = None
        self._marks_only = False
        self._unmarked_at = -math.inf  # when a commit last came without its mark (monotonic)

    @property
    def uses_inotify(self) -> bool:
        return self._inotify is not None

    @property
    def marks_only(self) -> bool:
        """Whether the watcher listens to the commits' marks alone (see module doc)."""
        return self._marks_only

    async def wait(self, timeout: float) -> None:
        """Return once a commit has shown since the last wait returned, or after ``timeout``."""
        # The descriptor has one reader at a time; a second waiter at once polls.
        if not self._busy.acquire(blocking=False):
            await self._poll_for_change(timeout, self._version())
            return
        try:
            since = self._seen
            with anyio.move_on_after(timeout) as waited:
                if self._inotify is None:
                    await self._poll_for_change(timeout, since)
                else:
                    self._listen(self._inotify)
                    await self._wait_for_commit(self._inotify)
            self._seen = self._version()
            if waited.cancelled_caught and self._seen != since and self._marks_only:
                # Changed, and no mark said so: a writer that marks nothing.
                self._unmarked_at = time.monotonic()
        finally:
            self._busy.release()

    def _listen(self, inotify: asyncinotify.Inotify) -> None:
        """Listen to the marks alone if no commit came unmarked lately, else to the WAL too."""
        import asyncinotify

        if self._mark_watch is None:
            with contextlib.suppress(OSError):  # not there yet: no taskq process has committed
                self._mark_watch = inotify.add_watch(self._mark_path, asyncinotify.Mask.MODIFY)
        marks_only = (
            self._mark_watch is not None
            and time.monotonic() - self._unmarked_at > _MARKS_TRIAL_SECONDS
        )
        if marks_only != self._marks_only:
            # The folder's watch is kept in both: it tells of a mark file made anew.
            mask = asyncinotify.Mask.CREATE | asyncinotify.Mask.MOVED_TO
            if not marks_only:
                mask |= asyncinotify.Mask.MODIFY
            with contextlib.suppress(OSError):
                inotify.add_watch(self._folder, mask)
                self._marks_only = marks_only

    async def _wait_for_commit(self, inotify: asyncinotify.Inotify) -> None:
        while self._version() == self._seen:
            await anyio.wait_readable(inotify.fd)
            heard = self._heard(inotify)
            if heard is not _Heard.WAL or await self._mark_heard(inotify):
                continue  # nothing new, or a mark: its commit shows (unless already seen)
            # A write to the WAL and no mark: a writer that marks nothing, or one
            # whose fsync is very slow. In a thread: the event loop's timers
            # (uvloop's) have a millisecond's grain, and a shorter sleep there spins.
            self._unmarked_at = time.monotonic()
            if not await anyio.to_thread.run_sync(self._settle, self._seen, abandon_on_cancel=True):
                # Not shown yet: a very slow fsync, or a late event of a commit
                # already seen. Polling until the wait ends misses neither.
                await self._poll_for_change(math.inf, self._seen)

    async def _mark_heard(self, inotify: asyncinotify.Inotify) -> bool:
        """After a write to the WAL: whether its commit's mark came within :data:`_MARK_SECONDS`."""
        with anyio.move_on_after(_MARK_SECONDS):
            while True:
                await anyio.wait_readable(inotify.fd)
                if self._heard(inotify) is _Heard.MARK:
                    return True
        return False

    def _heard(self, inotify: asyncinotify.Inotify) -> _Heard:
        """Read every queued event; the most telling of them (see :class:`_Heard`)."""
        import asyncinotify

        heard = _Heard.NOTHING
        while (event := inotify.sync_get()) is not None:
            if asyncinotify.Mask.Q_OVERFLOW in event.mask:  # a mark may be lost
                heard = _Heard.WAL if heard is _Heard.NOTHING else heard
            elif event.name is None:  # the mark file's own watch, or the folder's end
                if asyncinotify.Mask.IGNORED not in event.mask:
                    heard = _Heard.MARK
                elif event.watch is self._mark_watch:  # gone: watched again once made anew
                    self._mark_watch = None
            elif event.name.name == self._mark_path.name:
                if asyncinotify.Mask.MODIFY not in event.mask:
                    self._mark_watch = None  # made anew: its new file is watched at the next wait
                heard = _Heard.MARK
            elif event.name.name == self._wal_name and heard is _Heard.NOTHING:
                heard = _Heard.WAL
        return heard

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
