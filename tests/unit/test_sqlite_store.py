"""The embedded store's connection: its durability and WAL upkeep, and how it waits for locks."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.stores.sqlite_store import SqliteOptions, SqliteStore
from taskq.broker.stores.store import Statement


def _pragma(store: SqliteStore, name: str) -> object:
    (row,) = store.query(Statement(f"PRAGMA {name}", {}))
    return next(iter(row.values()))


def test_the_store_runs_in_wal_mode_with_full_sync_and_checkpoints_every_thousand_pages(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "synchronous") == 2  # FULL
        # A longer WAL makes every commit that grows it pay for the file's new size.
        assert _pragma(store, "wal_autocheckpoint") == 1_000
    finally:
        store.close()


def _statements_started(store: SqliteStore) -> tuple[threading.Event, threading.Event]:
    """Events set when the store's connection starts its first and its second statement."""
    first, second = threading.Event(), threading.Event()

    def started(sql: str) -> None:
        (second if first.is_set() else first).set()

    store._conn.set_trace_callback(started)
    return first, second


def test_a_write_waits_for_the_write_lock_another_process_holds(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    other = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        store.execute([Statement("CREATE TABLE t (n INTEGER)")])
        other.execute("BEGIN IMMEDIATE")
        _, retried = _statements_started(store)
        with ThreadPoolExecutor(1) as pool:
            write = pool.submit(store.execute, [Statement("INSERT INTO t VALUES (1)")])
            assert retried.wait(10), "the write never tried the lock again"
            other.execute("COMMIT")
            write.result(timeout=10)
        store._conn.set_trace_callback(None)
        assert store.query(Statement("SELECT n FROM t")) == [{"n": 1}]
    finally:
        other.close()
        store.close()


def _busy_error(path: Path) -> sqlite3.OperationalError:
    """SQLite's own "database is locked", with its result code: a write lock taken twice."""
    holder = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return exc
        raise AssertionError("the second write lock was granted")
    finally:
        other.close()
        holder.close()


class _LockedFirst:
    """A connection whose first statement finds the file locked, as while a process recovers it."""

    def __init__(self, conn: sqlite3.Connection, error: sqlite3.OperationalError) -> None:
        self.conn = conn
        self.error: sqlite3.OperationalError | None = error

    def execute(self, sql: str, params: dict[str, object]) -> sqlite3.Cursor:
        error, self.error = self.error, None
        if error is not None:
            raise error
        return self.conn.execute(sql, params)


def test_a_read_that_finds_the_file_locked_tries_again(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        store.execute(
            [Statement("CREATE TABLE t (n INTEGER)"), Statement("INSERT INTO t VALUES (1)")]
        )
        conn = store._conn
        store._conn = _LockedFirst(conn, _busy_error(tmp_path / "scratch.db"))  # type: ignore[assignment]
        assert store.query(Statement("SELECT n FROM t")) == [{"n": 1}]
        store._conn = conn
    finally:
        store.close()


def test_a_lock_held_past_the_busy_timeout_is_store_unavailable_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "jobs.db", SqliteOptions(busy_timeout_ms=50))
    other = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        store.execute([Statement("CREATE TABLE t (n INTEGER)")])
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(errors.StoreUnavailable, match="locked by another process"):
            store.execute([Statement("INSERT INTO t VALUES (1)")])
        other.execute("ROLLBACK")
        assert store.query(Statement("SELECT n FROM t")) == []
    finally:
        other.close()
        store.close()


def test_a_write_if_free_does_nothing_while_another_process_holds_the_write_lock(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    other = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        store.execute([Statement("CREATE TABLE t (n INTEGER)")])
        other.execute("BEGIN IMMEDIATE")
        assert store.execute_if_free([Statement("INSERT INTO t VALUES (1)")]) is None
        other.execute("ROLLBACK")
        assert store.query(Statement("SELECT n FROM t")) == []
        # Free again, it writes, and the connection took up no transaction of its own meanwhile.
        [inserted] = store.execute_if_free([Statement("INSERT INTO t VALUES (2)")]) or []
        assert inserted.rows_affected == 1
        assert store.query(Statement("SELECT n FROM t")) == [{"n": 2}]
    finally:
        other.close()
        store.close()


def test_a_step_if_free_does_nothing_while_another_thread_of_the_process_uses_the_store(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        store.execute(
            [Statement("CREATE TABLE t (n INTEGER)"), Statement("INSERT INTO t VALUES (1)")]
        )
        with store._lock:  # as held by a write in a worker thread
            assert store.query_if_free(Statement("SELECT n FROM t")) is None
            assert store.execute_if_free([Statement("INSERT INTO t VALUES (2)")]) is None
        assert store.query_if_free(Statement("SELECT n FROM t")) == [{"n": 1}]
    finally:
        store.close()


def test_a_read_if_free_that_finds_the_file_locked_gives_way(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        store.execute([Statement("CREATE TABLE t (n INTEGER)")])
        conn = store._conn
        store._conn = _LockedFirst(conn, _busy_error(tmp_path / "scratch.db"))  # type: ignore[assignment]
        assert store.query_if_free(Statement("SELECT n FROM t")) is None
        store._conn = conn
    finally:
        store.close()
