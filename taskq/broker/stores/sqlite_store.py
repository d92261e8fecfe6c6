"""The embedded store: one SQLite file shared by the processes of one machine.

WAL mode lets readers proceed while one writer commits; ``busy_timeout``
makes a statement wait for a lock instead of failing at once, so workers, the
console and scripts can share the file. Every batch runs under
``BEGIN IMMEDIATE`` so it takes the write lock before reading anything, which
rules out the upgrade deadlock of a deferred transaction.

The connection does not use SQLite's busy handler, which sleeps 1, 2, 5,
10... ms between tries: with busy workers a write transaction lasts well
under a millisecond, so a writer that slept that long would mostly wait for
a lock long free. ``BEGIN IMMEDIATE``, and a read that finds the file
locked (a process opening it or recovering its WAL), is retried every few
tens of microseconds at first instead, backing off to a millisecond, within
the busy timeout. Once ``BEGIN IMMEDIATE`` holds the write lock, nothing
else in the transaction waits for one: in WAL mode readers never block the
writer, and its COMMIT only appends to the WAL.

Every sqlite3 error is translated once, here, into :mod:`taskq.errors` by its
primary result code, with the file's path and SQLite's own words: a full disk
is :class:`~taskq.errors.StoreFull`, a damaged file
:class:`~taskq.errors.StoreCorrupt`, and so on. The store never creates a
missing directory: a path whose folder does not exist is a typo far more often
than a wish (``taskq.broker.client.connect`` creates the default store's folder).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import msgspec

from taskq import errors
from taskq.broker.stores.look_turns import LookTurns
from taskq.broker.stores.store import Consistency, NodeInfo, Row, Statement, StatementResult
from taskq.broker.stores.wal_watch import CommitMark, WalWatcher

_T = TypeVar("_T")
EMBEDDED_NODE_ID = "embedded"
"""The id of the one node an embedded store describes (``nodes()``), over HTTP too."""
_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_FIRST_LOCK_RETRY_SECONDS = 0.00005
_LONGEST_LOCK_RETRY_SECONDS = 0.001
# Pages of WAL (4 KiB each) after which a commit copies them back into the
# database file, holding up whoever made it; after the copy the WAL starts
# again from its beginning, in space the file already has. Until then every
# commit writes past the file's end, and its fsync must also commit the new
# size to the filesystem's journal, which on ext4 costs about as much again
# as the data: at 10,000 pages a new store's first ~1,250 submits each took
# 1.8x as long as later ones (430 vs 230 us), and 5,000 submits into a new
# file ran at 3,500/s against 4,250/s at 1,000 (SQLite's default), with no
# measurable change to a 5,000-job drain. Copying each page once per 1,000
# is cheap: most commits write the same few pages (the clock, the counts,
# the index leaves being filled).
_WAL_AUTOCHECKPOINT_PAGES = 1_000


class SqliteOptions(msgspec.Struct, frozen=True):
    """Tuning of the embedded store, settable in the store URL's query string."""

    busy_timeout_ms: int = 10_000
    # FULL keeps an acknowledged job through a power cut; NORMAL only through a crash.
    synchronous: str = "FULL"


class SqliteStore:
    """A :class:`taskq.broker.stores.store.Store` over a local SQLite file."""

    def __init__(self, path: str | Path, options: SqliteOptions | None = None) -> None:
        self.path = Path(path).expanduser()
        self.options = options or SqliteOptions()
        if not self.path.parent.is_dir():
            raise errors.ConfigError(
                f"SQLite store {self.path}: directory {self.path.parent} does not exist"
            )
        # One connection, guarded by a lock, serves every thread of this
        # process: the async entry points run the same code in a worker thread.
        self._lock = threading.Lock()
        self._conn = self._connect()
        # Tells the idle workers' watchers of each commit this process makes (wal_watch).
        self._commit_mark = CommitMark(self.path)
        # Not under ``_lock``: the event loop takes it, and must not wait for a statement.
        self._watcher_lock = threading.Lock()
        self._watcher: WalWatcher | None = None
        self._turns: LookTurns | None = None

    @property
    def url(self) -> str:
        return f"sqlite://{self.path}"

    def writes_held(self) -> contextlib.AbstractContextManager[object]:
        """While entered, this process writes nothing (see ``store.WriteHoldingStore``)."""
        return self._lock

    def _connect(self) -> sqlite3.Connection:
        try:
            # No busy handler (timeout 0): the store retries a locked file itself (see above).
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0
            )
        except sqlite3.Error as exc:
            raise self._wrap(exc, index=0, sql="") from exc
        try:
            conn.row_factory = sqlite3.Row
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self.options.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_AUTOCHECKPOINT_PAGES}")
        except sqlite3.Error as exc:
            conn.close()
            raise self._wrap(exc, index=0, sql="") from exc
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL takes an exclusive lock and does not
        # wait for the busy timeout: processes starting together would fail
        # at once. Retry within the busy timeout instead.
        deadline = time.monotonic() + self.options.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if _primary_code(exc) not in _BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        # A local transaction either commits or rolls back: its outcome is
        # never unknown, so ``idempotent`` changes nothing here.
        with self._lock:
            conn = self._conn
            try:
                self._while_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
            except sqlite3.Error as exc:
                raise self._wrap(exc, index=0, sql="BEGIN IMMEDIATE") from exc
            return self._run_and_commit(statements)

    def execute_if_free(self, statements: Sequence[Statement]) -> list[StatementResult] | None:
        """:meth:`execute`, unless it would wait for a lock: then None, and nothing done.

        For a caller that must not wait (an idle worker's look, on its event
        loop): another thread of this process, or another process, may hold
        the write lock for as long as its write takes, and the caller then
        runs :meth:`execute` where waiting harms nothing.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                if _primary_code(exc) in _BUSY:
                    return None
                raise self._wrap(exc, index=0, sql="BEGIN IMMEDIATE") from exc
            return self._run_and_commit(statements)
        finally:
            self._lock.release()

    def _run_and_commit(self, statements: Sequence[Statement]) -> list[StatementResult]:
        """The statements of a transaction just begun, then its commit (under ``_lock``)."""
        conn = self._conn
        results: list[StatementResult] = []
        for index, statement in enumerate(statements):
            try:
                cursor = conn.execute(statement.sql, dict(statement.params))
                rows = [dict(row) for row in cursor.fetchall()]
            except sqlite3.Error as exc:
                _roll_back(conn)
                raise self._wrap(exc, index=index, sql=statement.sql) from exc
            except BaseException:
                # A parameter SQLite cannot hold (OverflowError), an interrupt:
                # left open, the transaction would fail every later write with
                # "cannot start a transaction within a transaction".
                _roll_back(conn)
                raise
            results.append(
                StatementResult(
                    rows=rows,
                    rows_affected=max(cursor.rowcount, 0),
                    last_insert_id=cursor.lastrowid,
                )
            )
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _roll_back(conn)
            raise self._wrap(exc, index=len(statements), sql="COMMIT") from exc
        self._commit_mark.tell()
        return results

    def _while_locked(self, attempt: Callable[[], _T]) -> _T:
        """``attempt()``, tried again while another process holds the lock it needs (see above)."""
        try:
            return attempt()
        except sqlite3.OperationalError as exc:
            if _primary_code(exc) not in _BUSY:
                raise
        deadline = time.monotonic() + self.options.busy_timeout_ms / 1000
        pause = _FIRST_LOCK_RETRY_SECONDS
        while True:
            time.sleep(pause)
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if _primary_code(exc) not in _BUSY or time.monotonic() > deadline:
                    raise
            pause = min(pause * 2, _LONGEST_LOCK_RETRY_SECONDS)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return await anyio.to_thread.run_sync(
            lambda: self.execute(statements, idempotent=idempotent)
        )

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        # One file on one machine: every read already sees every committed write.
        conn, params = self._conn, dict(statement.params)
        with self._lock:
            try:
                return self._while_locked(
                    lambda: [dict(row) for row in conn.execute(statement.sql, params).fetchall()]
                )
            except sqlite3.Error as exc:
                raise self._wrap(exc, index=0, sql=statement.sql) from exc

    def query_if_free(self, statement: Statement) -> list[Row] | None:
        """:meth:`query`, unless it would wait for a lock: None then, as for a write."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            cursor = self._conn.execute(statement.sql, dict(statement.params))
            return [dict(row) for row in cursor.fetchall()]
        except sqlite3.Error as exc:
            # A read waits only for a process opening the file or recovering its WAL.
            if _primary_code(exc) in _BUSY:
                return None
            raise self._wrap(exc, index=0, sql=statement.sql) from exc
        finally:
            self._lock.release()

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return await anyio.to_thread.run_sync(
            lambda: self.query(statement, consistency=consistency)
        )

    async def wait_for_change(self, timeout: float) -> None:
        watcher = self._watcher
        if watcher is None:
            # The first wait makes the watcher in a thread: making it imports the
            # inotify bindings, which look libc up with ``ldconfig`` in a subprocess,
            # 5-20 ms that would stall the loop. A worker's first wait comes while its
            # first jobs report (a claim that came back short), and their reports go
            # meanwhile.
            watcher = await anyio.to_thread.run_sync(self._change_watcher)
        if watcher is None:  # the file cannot be opened now: the caller's look will say why
            await anyio.sleep(timeout)
        else:
            await watcher.wait(timeout)

    def _change_watcher(self) -> WalWatcher | None:
        """The store's watcher, made on the first wait: a client that never waits needs none."""
        with self._watcher_lock:
            if self._watcher is None:
                with contextlib.suppress(sqlite3.Error):
                    self._watcher = WalWatcher(self.path)
            return self._watcher

    @property
    def tells_of_changes(self) -> bool:
        """Always: a wait ends on any commit (inotify, or polling ``data_version``)."""
        return True

    def look_turns(self) -> LookTurns:
        """The turn of this store's idle workers to claim (``look_turns``)."""
        with self._watcher_lock:
            if self._turns is None:
                self._turns = LookTurns(self.path.parent)
            return self._turns

    def nodes(self) -> list[NodeInfo]:
        return [
            NodeInfo(
                id=EMBEDDED_NODE_ID,
                address=str(self.path),
                reachable=self.path.exists(),
                leader=True,
                raft_state="embedded (no replication)",
                version=f"SQLite {sqlite3.sqlite_version}",
            )
        ]

    def copy_to(self, destination: Path) -> None:
        """Copy the store into the new file ``destination``, consistent while others write.

        SQLite's online backup in a single step: one read transaction, so the
        copy is the store as of one commit, while writers carry on in the WAL.
        """
        with self._lock:
            try:
                copy = sqlite3.connect(destination, isolation_level=None, timeout=0)
            except sqlite3.Error as exc:
                raise errors.StoreError(f"cannot create {destination}: {exc}") from exc
            try:
                self._while_locked(lambda: self._conn.backup(copy))
            except sqlite3.Error as exc:
                if _primary_code(exc) in _BUSY:
                    raise self._wrap(exc, index=0, sql="") from exc
                raise errors.StoreError(
                    f"SQLite store {self.path}: copying it to {destination} failed: {exc}"
                ) from exc
            finally:
                copy.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._commit_mark.close()
            if self._watcher is not None:
                self._watcher.close()
        with self._watcher_lock:
            if self._turns is not None:
                self._turns.close()

    def _wrap(self, exc: sqlite3.Error, *, index: int, sql: str) -> errors.StoreError:
        """Translate a sqlite3 error into taskq's hierarchy, once, at this edge."""
        code = _primary_code(exc)
        where = f"SQLite store {self.path}: {exc}"
        if isinstance(exc, sqlite3.IntegrityError) or code == sqlite3.SQLITE_CONSTRAINT:
            return errors.ConstraintViolation(str(exc), index=index, sql=sql)
        if code in _BUSY:
            return errors.StoreUnavailable(f"{where} (locked by another process)")
        if code == sqlite3.SQLITE_FULL:
            return errors.StoreFull(where)
        # Opening a store whose -shm file is gone (no process has it open) makes
        # that file anew, and on a full disk SQLite says only "disk I/O error".
        if _extended_code(exc) == sqlite3.SQLITE_IOERR_SHMSIZE and self._filesystem_full():
            return errors.StoreFull(f"{where} (the disk is full: no room for its -shm file)")
        if code in {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}:
            return errors.StoreCorrupt(where)
        # SQLite says only "unable to open database file" when it cannot make
        # the WAL's files: the filesystem and the modes tell why.
        cannot_open = code == sqlite3.SQLITE_CANTOPEN
        if code == sqlite3.SQLITE_READONLY:
            return errors.StoreReadOnly(where)
        if cannot_open and self._on_read_only_filesystem():
            return errors.StoreReadOnly(f"{where} (its filesystem is mounted read-only)")
        if code in {sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH} or (
            cannot_open and not self._may_open()
        ):
            return errors.StorePermissionDenied(f"{where} (permission denied)")
        if code in {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR}:
            return errors.StoreUnavailable(where)
        return errors.StatementError(str(exc), index=index, sql=sql)

    def _filesystem_full(self) -> bool:
        try:
            return os.statvfs(self.path.parent).f_bavail == 0
        except OSError:
            return False

    def _on_read_only_filesystem(self) -> bool:
        try:
            return bool(os.statvfs(self.path.parent).f_flag & os.ST_RDONLY)
        except OSError:
            return False

    def _may_open(self) -> bool:
        """Whether the modes let this process write the file and make its WAL beside it."""
        if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
            return False
        return os.access(self.path.parent, os.W_OK | os.X_OK)

    async def aclose(self) -> None:
        self.close()


def _primary_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code: ``SQLITE_IOERR`` for ``SQLITE_IOERR_WRITE`` and its kin."""
    return _extended_code(exc) & 0xFF


def _extended_code(exc: sqlite3.Error) -> int:
    """SQLite's extended result code, as ``SQLITE_IOERR_SHMSIZE``."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0)


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a failed transaction, if SQLite has not already ended it.

    After a full disk, an I/O error or a corrupt page SQLite rolls the
    transaction back by itself; a ROLLBACK then would fail with "no
    transaction is active" and hide the reason. A ROLLBACK that fails anyway
    leaves nothing to undo: the first error is the one worth reporting.
    """
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
