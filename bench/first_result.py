"""How soon the first result comes after workers are launched onto a queued backlog.

The peers' harness (``../shared/peers-bench``) times a drain from the launch
of 2 workers with their default settings, and its first result is mostly
their start-up: Python starting, the worker's imports, its store, its first
pool child (issue 44 brought it level with Huey's). This launches 2
``taskq-worker`` processes with default settings (the bench's jobs module
only) onto a queue of echo jobs, polls the store every 10 ms as that
harness does, and takes the time the poll first sees a result less the wall
time just before the launch: the first job's report is part of it. Beside it,
the first job's own end (its ``finished_at``, the worker's measure). A few
launches, each on a queue of its own; the workers are stopped after each,
and the jobs they left are cancelled.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import finished_count, jobs_pythonpath, jobs_since, wait_until
from bench.end_to_end import WORKERS, enqueue_echo, worker_config
from bench.stores import BenchStore
from taskq.broker.client.client import Client
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_cancel
from taskq.dev.workers import WorkerFleet, environment_without

BACKLOG = 100  # enough for both workers' first claims
POLL_SECONDS = 0.010  # as the peers' harness polls


def first_result_after_launch(
    store: BenchStore, client: Client, root: Path, *, launches: int
) -> dict[str, Any]:
    """Milliseconds from launch to the first result, for each of ``launches``, and their median."""
    taken: list[float] = []
    ended: list[float] = []
    for launch in range(launches):
        queue = f"bench-first-result-{launch}"
        first_id = enqueue_echo(client, queue, 0, BACKLOG)
        directory = root / queue
        directory.mkdir(parents=True, exist_ok=True)
        args = ["--queues", queue, "--config", str(worker_config(directory))]
        env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
        fleet = WorkerFleet(directory, env=env)
        try:
            launched = time.time()
            for index in range(WORKERS):
                fleet.start(store.url, tag=f"first-result-{launch}-{index + 1}", args=args)
            wait_until(
                lambda: finished_count(client.store, queue) >= 1,  # noqa: B023 (called at once)
                60.0,
                "the first result after launch",
                interval=POLL_SECONDS,
            )
            seen = time.time()
        finally:
            fleet.close()
        jobs = list(jobs_since(client.store, queue, first_id))
        first = min(job.finished_at for job in jobs if job.finished_at is not None)
        taken.append(1000 * (seen - launched))
        ended.append(1000 * (first - launched))
        plan.run(client.store, job_cancel([job.id for job in jobs if job.finished_at is None]))
    return {
        "launches": launches,
        "backlog": BACKLOG,
        "p50_ms": statistics.median(taken),
        "min_ms": min(taken),
        "max_ms": max(taken),
        "ms": [round(value, 1) for value in taken],
        "ended_p50_ms": statistics.median(ended),
    }
