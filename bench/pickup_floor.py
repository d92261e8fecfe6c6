"""The least a pickup on the embedded store can take, with nothing of taskq in the way.

Issue 44 measures the embedded pickup against two idle one-row commits (the
submit's and the claim's). A pickup also has to wake the idle worker and
hand the job to the process that runs it, and on a virtual machine a
process that slept 20 ms takes its time to run again. This measures that
whole path with plain ``sqlite3`` and no broker, at the store's durability
(WAL, ``synchronous=FULL``):

* a submitter process commits one row and notes the time;
* a worker process, blocked in ``read`` on an inotify descriptor watching
  the ``-wal`` file, wakes, waits for ``PRAGMA data_version`` to move,
  claims the row in a ``BEGIN IMMEDIATE`` write (``UPDATE ... RETURNING``),
  and writes its id to a pipe;
* a runner process, blocked on that pipe, reads the time: the job's "first
  line".

Each of the three is a process of its own, as the client, the worker and its
pool child are. One submit every ``gap`` seconds, as the pickup bench sends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import select
import sqlite3
import struct
import time
from multiprocessing.connection import Connection
from pathlib import Path

from bench.common import percentile

_IN_MODIFY = 0x00000002
_IN_CLOEXEC = 0o2000000
_STOP = -1
# Longer than any fsync: a commit whose fsync outlasts it would never be seen (no later
# event comes), and the bench would wait forever. A disk whose fsync sometimes takes
# over 5 ms, the bound before, hung it.
_SETTLE_SECONDS = 1.0


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _inotify(directory: Path) -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = int(libc.inotify_init1(_IN_CLOEXEC))
    if fd < 0 or libc.inotify_add_watch(fd, bytes(directory), _IN_MODIFY) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    return fd


def _worker(path: Path, to_runner: int, ready: Connection) -> None:
    conn = _connect(path)
    watch = _inotify(path.parent)
    seen = _version(conn)
    ready.send(True)
    while True:
        # A commit made while this one claimed (its events read with its own) shows at once.
        if (version := _version(conn)) == seen:
            events = os.read(watch, 4096)
            # Only writes to the -wal file; the commit shows once its fsync is done.
            if path.name + "-wal" not in _event_names(events):
                continue
            # The write comes before the commit's fsync: look until it shows.
            settle_until = time.monotonic() + _SETTLE_SECONDS
            while (version := _version(conn)) == seen and time.monotonic() < settle_until:
                time.sleep(0.0001)
            if version == seen:
                continue
        seen = version
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "UPDATE jobs SET state = 'running' WHERE id = "
            "(SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) RETURNING id"
        ).fetchone()
        conn.execute("COMMIT")
        # Its own commit's writes left events too, which never show as a change.
        while select.select([watch], [], [], 0)[0]:
            os.read(watch, 4096)
        if row is not None:
            os.write(to_runner, struct.pack("q", row[0]))
            if row[0] == _STOP:
                return


def _version(conn: sqlite3.Connection) -> int:
    """SQLite's count of other connections' commits, as this connection sees it."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _event_names(events: bytes) -> set[str]:
    names, offset = set(), 0
    while offset + 16 <= len(events):
        length = struct.unpack_from("iIII", events, offset)[3]
        name = events[offset + 16 : offset + 16 + length].rstrip(b"\0")
        names.add(name.decode(errors="replace"))
        offset += 16 + length
    return names


def _runner(from_worker: int, stamps: Connection) -> None:
    while True:
        (job,) = struct.unpack("q", os.read(from_worker, 8))
        stamps.send((job, time.monotonic()))
        if job == _STOP:
            return


def pickup_floor(directory: Path, count: int, gap: float) -> list[float]:
    """Seconds from each submit's start to its runner's wake-up, ``count`` submits ``gap`` apart."""
    path = directory / "pickup-floor.db"
    conn = _connect(path)
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
    conn.execute("CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued'")
    context = multiprocessing.get_context("fork")
    read_end, write_end = os.pipe()
    ready_here, ready_there = context.Pipe(duplex=False)
    stamps_here, stamps_there = context.Pipe(duplex=False)
    worker = context.Process(target=_worker, args=(path, write_end, ready_there))
    runner = context.Process(target=_runner, args=(read_end, stamps_there))
    worker.start()
    runner.start()
    took: list[float] = []
    try:
        ready_here.recv()
        for number in range(1, count + 1):
            time.sleep(gap)
            began = time.monotonic()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO jobs (id, state) VALUES (?, 'queued')", (number,))
            conn.execute("COMMIT")
            job, woke = stamps_here.recv()
            assert job == number, (job, number)
            took.append(woke - began)
        conn.execute("INSERT INTO jobs (id, state) VALUES (?, 'queued')", (_STOP,))
        stamps_here.recv()
    finally:
        worker.join(timeout=5.0)
        runner.join(timeout=5.0)
        for process in (worker, runner):
            if process.is_alive():
                process.kill()
        os.close(read_end)
        os.close(write_end)
        conn.close()
    return took


def summary(took: list[float]) -> dict[str, float]:
    ms = [value * 1000 for value in took]
    return {"p50_ms": percentile(ms, 0.50), "p99_ms": percentile(ms, 0.99)}
