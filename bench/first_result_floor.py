"""The least a first result after launch can take in taskq's shape, with nothing of taskq in it.

``start.first_result`` launches 2 workers onto a queued backlog. Each
worker is a Python process that must import the libraries it cannot run
without (msgspec for its messages, asyncio for its loop, sqlite3 for the
store) and start a pool child, a second interpreter started afresh (not
forked: it must not inherit the worker's environment or memory) that
imports msgspec before it can take a job. Then the worker claims a job in
one write, hands it to the child, and writes its result in a second.

This runs that shape with bare Python: 2 launches of a script that does
exactly the above against a table of one column, and takes the time a poll
every 10 ms first sees a result (as ``start.first_result`` does) less the
launch time. taskq's own start-up, above this, is its imports, its
settings, its roles and its messages.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

# The child: the imports a pool child cannot do without, then a job's id in,
# its result out, as a pool child takes a job from its worker.
_CHILD = (
    "import sys, msgspec\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "job = sys.stdin.readline().strip()\n"
    "sys.stdout.write(job + '\\n'); sys.stdout.flush()\n"
)

# The worker: starts its child first, imports the rest meanwhile, claims one
# row, hands it over and commits its result with the time it came back.
_WORKER = """
import subprocess, sys, time
import msgspec
child = subprocess.Popen(
    [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
)
import asyncio, sqlite3
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10.0)
conn.execute("PRAGMA synchronous=FULL")
child.stdout.readline()
conn.execute("BEGIN IMMEDIATE")
row = conn.execute(
    "UPDATE jobs SET state = 'running' WHERE id = "
    "(SELECT id FROM jobs WHERE state = 'queued' LIMIT 1) RETURNING id"
).fetchone()
conn.execute("COMMIT")
child.stdin.write(f"{row[0]}\\n"); child.stdin.flush()
done = child.stdout.readline().strip()
conn.execute(
    "UPDATE jobs SET state = 'done', finished_at = ? WHERE id = ?", (time.time(), int(done))
)
child.kill()
"""

WORKERS = 2
BACKLOG = 100
POLL_SECONDS = 0.010  # as start.first_result polls


def launch_once(directory: Path, launch: int) -> float:
    """Milliseconds from the launch of 2 bare workers to their first result, once
    (``launch`` names its store file), for the bench to take in turn with taskq's."""
    directory.mkdir(parents=True, exist_ok=True)
    script = f"CHILD = {_CHILD!r}\n{_WORKER}"
    path = directory / f"floor-{launch}.db"
    _queue_backlog(path)
    launched = time.time()
    workers = [subprocess.Popen([sys.executable, "-c", script, str(path)]) for _ in range(WORKERS)]
    seen = _first_seen(path, launched + 60)
    for worker in workers:
        if worker.wait(timeout=60) != 0:
            raise RuntimeError(f"a floor worker failed with status {worker.returncode}")
    return 1000 * (seen - launched)


def _first_seen(path: Path, deadline: float) -> float:
    """When a poll of ``path`` every 10 ms first finds a result."""
    conn = sqlite3.connect(path, timeout=10.0)
    try:
        while time.time() < deadline:
            (done,) = conn.execute("SELECT count(*) FROM jobs WHERE state = 'done'").fetchone()
            if done:
                return time.time()
            time.sleep(POLL_SECONDS)
    finally:
        conn.close()
    raise RuntimeError("no floor worker wrote a result within 60 s")


def _queue_backlog(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, finished_at REAL)"
        )
        conn.executemany("INSERT INTO jobs (state) VALUES (?)", [("queued",)] * BACKLOG)
    finally:
        conn.close()
