"""The two stores under test, and what the bench measures of each without the broker.

* ``sqlite``: a fresh file in a temporary directory, opened by URL with the
  defaults (WAL, synchronous=FULL).
* ``rqlite``: a 3-node cluster on free loopback ports, started by
  :func:`taskq.dev.cluster.running_cluster` (rqlited from ``TASKQ_RQLITED``,
  PATH, or the cache ``scripts/install_rqlite.sh`` builds into) and killed by
  pid on the way out.

Each also knows its raw ceiling (rows inserted with no broker logic) and
how to count the writes committed to it while workers sit idle.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import in_background
from taskq.broker.client.connect import open_store
from taskq.dev.cluster import RqliteCluster, running_cluster

RAW_TABLE = "bench_raw_jobs"


@dataclass
class BenchStore:
    """A store the bench runs against: its name, URL and the processes that serve it."""

    name: str
    url: str
    directory: Path
    """Where the store keeps its files (all of its nodes', for rqlite)."""
    server_pids: list[int] = field(default_factory=list)
    sqlite_path: Path | None = None
    cluster: RqliteCluster | None = None  # for rqlite

    @property
    def label(self) -> str:
        return "SQLite file (WAL, synchronous=FULL)" if self.name == "sqlite" else "rqlite, 3 nodes"

    # -- the raw ceiling --------------------------------------------------------------

    def raw_insert(self, rows: list[tuple[str, str]], batch: int) -> float:
        """Insert ``rows`` (queue, payload) in batches with no broker logic; seconds taken."""
        if self.name == "sqlite":
            return _sqlite_raw_insert(self._raw_path(), rows, batch)
        return _rqlite_raw_insert(self._leader_url(), rows, batch, multi_row=False)

    def raw_insert_multirow(self, rows: list[tuple[str, str]], batch: int) -> float:
        """rqlite only: one multi-row INSERT statement per request instead of ``batch`` ones."""
        return _rqlite_raw_insert(self._leader_url(), rows, batch, multi_row=True)

    def raw_insert_jobs_table(self, rows: list[tuple[str, str]], batch: int) -> float:
        """Insert ``rows`` straight into taskq's own ``jobs`` table, no broker logic; seconds.

        The table keeps its indexes, its UNIQUE idempotency key and its count
        trigger, so this separates what the schema costs from what the
        broker's enqueue adds. SQLite: a migrated file of its own, executemany;
        rqlite: the cluster's database (queue ``bench-raw``, which no worker
        reads), one multi-row INSERT per request.
        """
        now = time.time()
        full = [
            (queue, "call", payload, now, f"raw:{uuid.uuid4().hex}", now) for queue, payload in rows
        ]
        if self.name == "sqlite":
            assert self.sqlite_path is not None
            path = self.sqlite_path.with_name("raw-jobs.db")
            open_store(f"sqlite://{path}").close()  # the schema, through the migrations
            return _sqlite_raw_jobs(path, full, batch)
        return _rqlite_raw_jobs(self._leader_url(), full, batch)

    def raw_commits_jobs_table(self, count: int) -> list[float]:
        """SQLite: ``count`` one-job commits straight into taskq's own ``jobs`` table, back
        to back (its indexes, its UNIQUE key, its count trigger; no broker logic), each
        one's seconds: what the schema costs a single submit."""
        assert self.sqlite_path is not None, "the jobs table's commits are timed on SQLite"
        path = self.sqlite_path.with_name("raw-jobs-commits.db")
        open_store(f"sqlite://{path}").close()  # the schema, through the migrations
        return _sqlite_raw_jobs_commits(path, count)

    def raw_commits(self, count: int, *, gap: float = 0.0) -> list[float]:
        """Commit ``count`` one-row transactions, ``gap`` seconds apart; each one's seconds."""
        if self.name == "sqlite":
            return _sqlite_raw_commits(self._raw_path(), count, gap)
        return _rqlite_raw_commits(self._leader_url(), count, gap)

    def _raw_path(self) -> Path:
        assert self.sqlite_path is not None
        # A file of its own beside the store, with the store's pragmas.
        return self.sqlite_path.with_name("raw.db")

    def _rqlite(self) -> RqliteCluster:
        assert self.cluster is not None, "an rqlite store has its cluster"
        return self.cluster

    def _leader_status(self) -> dict[str, Any]:
        cluster = self._rqlite()
        status: dict[str, Any] = cluster.status(cluster.wait_for_leader()) or {}
        return status

    def _leader_url(self) -> str:
        return str(self._rqlite().wait_for_leader().base_url)

    # -- writes while idle ----------------------------------------------------------------

    @contextmanager
    def count_writes(self) -> Iterator[dict[str, int]]:
        """Count the transactions committed to the store inside the ``with`` block.

        rqlite: the leader's raft commit index (one entry per write request).
        SQLite: changes of ``PRAGMA data_version``, read every millisecond on a
        connection of this process (two commits within one millisecond count once).
        """
        counted = {"writes": 0}
        if self.name == "rqlite":
            start = self._commit_index()
            yield counted
            counted["writes"] = self._commit_index() - start
            return
        assert self.sqlite_path is not None
        path = self.sqlite_path

        def watch(stop: threading.Event) -> None:
            conn = sqlite3.connect(path, timeout=5)
            try:
                last = conn.execute("PRAGMA data_version").fetchone()[0]
                while not stop.is_set():
                    time.sleep(0.001)
                    now = conn.execute("PRAGMA data_version").fetchone()[0]
                    if now != last:
                        counted["writes"] += 1
                        last = now
            finally:
                conn.close()

        with in_background("bench-write-counter", watch):
            yield counted

    @contextmanager
    def count_wal_pages(self) -> Iterator[dict[str, int]]:
        """SQLite only: count the pages committed to the WAL inside the ``with`` block.

        A RESTART checkpoint first makes the next commit write the WAL from its
        start (keeping the file's size, so that no commit of the block pays for
        growing it), and its frames are counted after; the block must commit
        fewer pages than the store checkpoints at (1,000), or some go uncounted.
        """
        assert self.sqlite_path is not None, "only a SQLite store has a WAL"
        conn = sqlite3.connect(self.sqlite_path, timeout=5)
        try:
            conn.execute("PRAGMA wal_checkpoint(RESTART)")
            counted = {"pages": 0}
            yield counted
            # (busy, frames in the WAL, frames checkpointed)
            counted["pages"] = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        finally:
            conn.close()

    def _commit_index(self) -> int:
        return int(self._leader_status()["store"]["raft"]["commit_index"])

    def version(self) -> str:
        if self.name == "sqlite":
            return f"SQLite {sqlite3.sqlite_version}"
        build = self._leader_status().get("build", {})
        return f"rqlite {build.get('version', '?')}" if isinstance(build, dict) else "rqlite"


@contextmanager
def open_bench_store(name: str, root: Path) -> Iterator[BenchStore]:
    """A fresh store of kind ``name`` under ``root``; an rqlite cluster is killed on exit."""
    if name == "sqlite":
        path = root / "sqlite" / "bench.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        yield BenchStore(
            name="sqlite", url=f"sqlite://{path}", directory=path.parent, sqlite_path=path
        )
        return
    with running_cluster(root / "rqlite", size=3) as cluster:
        pids = [node.process.pid for node in cluster.nodes if node.process is not None]
        yield BenchStore(
            name="rqlite",
            url=cluster.url,
            directory=root / "rqlite",
            server_pids=pids,
            cluster=cluster,
        )


# -- SQLite -------------------------------------------------------------------------------


def _sqlite_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {RAW_TABLE} "
        "(id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL)"
    )
    return conn


def _timed_batches(
    conn: sqlite3.Connection, sql: str, rows: Sequence[tuple[Any, ...]], batch: int
) -> float:
    """Seconds to insert ``rows`` with ``sql``, one transaction per ``batch``; closes ``conn``."""
    try:
        started = time.perf_counter()
        for first in range(0, len(rows), batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows[first : first + batch])
            conn.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        conn.close()


def _sqlite_raw_insert(path: Path, rows: list[tuple[str, str]], batch: int) -> float:
    sql = f"INSERT INTO {RAW_TABLE} (queue, payload) VALUES (?, ?)"
    return _timed_batches(_sqlite_connect(path), sql, rows, batch)


_JOBS_COLUMNS = "(queue, kind, payload, run_at, idempotency_key, created_at)"
_JOBS_INSERT = f"INSERT INTO jobs {_JOBS_COLUMNS} VALUES (?, ?, ?, ?, ?, ?)"


def _sqlite_raw_jobs(path: Path, rows: list[tuple[Any, ...]], batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    return _timed_batches(conn, _JOBS_INSERT, rows, batch)


def _sqlite_raw_jobs_commits(path: Path, count: int) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")

    def commit(number: int) -> None:
        now = time.time()
        # A rising key, as a submit's own: it goes at the end of the key's index.
        key = f"raw:{time.time_ns():016x}{number:08x}"
        conn.execute(_JOBS_INSERT, ("bench-raw", "call", payload_text(number), now, key, now))

    try:
        return _timed_one_by_one(commit, count, 0.0)
    finally:
        conn.close()


def _sqlite_raw_commits(path: Path, count: int, gap: float) -> list[float]:
    conn = _sqlite_connect(path)
    sql = f"INSERT INTO {RAW_TABLE} (queue, payload) VALUES (?, ?)"

    def commit(number: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, ("raw", str(number)))
        conn.execute("COMMIT")

    try:
        return _timed_one_by_one(commit, count, gap)
    finally:
        conn.close()


def _timed_one_by_one(commit: Callable[[int], None], count: int, gap: float) -> list[float]:
    """Seconds each of ``count`` calls of ``commit`` took, with ``gap`` seconds idle between."""
    took = []
    for number in range(count):
        started = time.perf_counter()
        commit(number)
        took.append(time.perf_counter() - started)
        if gap:
            time.sleep(gap)
    return took


# -- rqlite -------------------------------------------------------------------------------


def _rqlite_execute(client: httpx.Client, leader: str, body: list[Any]) -> None:
    reply = client.post(f"{leader}/db/execute", params={"transaction": ""}, json=body)
    reply.raise_for_status()
    data = reply.json()
    errors = [result["error"] for result in data.get("results", []) if "error" in result]
    if "error" in data or errors:
        raise RuntimeError(f"rqlite refused a raw write: {data.get('error') or errors[0]}")


def _rqlite_client() -> httpx.Client:
    return httpx.Client(timeout=60.0)


def _rqlite_create(client: httpx.Client, leader: str) -> None:
    _rqlite_execute(
        client,
        leader,
        [
            f"CREATE TABLE IF NOT EXISTS {RAW_TABLE} "
            "(id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL)"
        ],
    )


def _rqlite_raw_insert(
    leader: str, rows: list[tuple[str, str]], batch: int, *, multi_row: bool
) -> float:
    with _rqlite_client() as client:
        _rqlite_create(client, leader)
        bodies: list[list[Any]] = []
        for first in range(0, len(rows), batch):
            chunk = rows[first : first + batch]
            if multi_row:
                values = ", ".join("(?, ?)" for _ in chunk)
                flat = [value for row in chunk for value in row]
                bodies.append(
                    [[f"INSERT INTO {RAW_TABLE} (queue, payload) VALUES {values}", *flat]]
                )
            else:
                sql = f"INSERT INTO {RAW_TABLE} (queue, payload) VALUES (?, ?)"
                bodies.append([[sql, *row] for row in chunk])
        started = time.perf_counter()
        for body in bodies:
            _rqlite_execute(client, leader, body)
        return time.perf_counter() - started


def _rqlite_raw_jobs(leader: str, rows: list[tuple[Any, ...]], batch: int) -> float:
    with _rqlite_client() as client:
        bodies: list[list[Any]] = []
        for first in range(0, len(rows), batch):
            chunk = rows[first : first + batch]
            values = ", ".join("(?, ?, ?, ?, ?, ?)" for _ in chunk)
            flat = [value for row in chunk for value in row]
            bodies.append([[f"INSERT INTO jobs {_JOBS_COLUMNS} VALUES {values}", *flat]])
        started = time.perf_counter()
        for body in bodies:
            _rqlite_execute(client, leader, body)
        return time.perf_counter() - started


def _rqlite_raw_commits(leader: str, count: int, gap: float) -> list[float]:
    with _rqlite_client() as client:
        _rqlite_create(client, leader)
        sql = f"INSERT INTO {RAW_TABLE} (queue, payload) VALUES (?, ?)"
        return _timed_one_by_one(
            lambda number: _rqlite_execute(client, leader, [[sql, "raw", str(number)]]),
            count,
            gap,
        )


def payload_text(number: int) -> str:
    """The payload JSON a bench job carries, for raw rows of the same size."""
    return json.dumps(
        {"target": "bench.jobs:echo", "args": [number], "kwargs": {}}, separators=(",", ":")
    )
