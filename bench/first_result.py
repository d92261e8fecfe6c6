"""How soon the first result comes after workers are launched onto a queued backlog,
and the CPU their start costs.

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

On 2 busy cores a drain from launch is the CPU it costs, and start-up is a
large part of it (a third of a 5,000-job drain on 2 cores, 2026-12-02):
:func:`start_cpu` launches the same 2 workers onto an empty queue and
takes the CPU they and their pool children used once all have started.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import (
    cpu_sample,
    finished_count,
    jobs_pythonpath,
    jobs_since,
    pool_children_idle,
    wait_until,
)
from bench.end_to_end import WORKERS, enqueue_echo, worker_config
from bench.stores import BenchStore
from taskq.broker.client.client import Client
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_cancel
from taskq.dev.workers import WorkerFleet, environment_without

BACKLOG = 100  # enough for both workers' first claims
POLL_SECONDS = 0.010  # as the peers' harness polls
# Started: the processes under the workers the same, and their CPU still,
# over a window this long (a worker starts its other pool children 0.1 s
# after it registered).
SETTLE_SECONDS = 0.2


def first_result_after_launch(
    store: BenchStore,
    client: Client,
    root: Path,
    *,
    launches: int,
    beside: Callable[[int], float] | None = None,
) -> dict[str, Any]:
    """Milliseconds from launch to the first result, for each of ``launches``, and their median.

    ``beside``: another launch (the floor's) taken in turn with each of these,
    given the launch's number and giving its milliseconds: the host's share
    of the machine moves within seconds on a virtual machine (``host_cpu``),
    so a ratio of launches taken side by side holds where one of two runs a
    minute apart would not. Its times and each pair's ratio come back too.
    """
    taken: list[float] = []
    ended: list[float] = []
    besides: list[float] = []
    for launch in range(launches):
        seen, first = _launch_once(store, client, root, launch)
        taken.append(seen)
        ended.append(first)
        if beside is not None:
            besides.append(beside(launch))
    found: dict[str, Any] = {
        "launches": launches,
        "backlog": BACKLOG,
        "p50_ms": statistics.median(taken),
        "min_ms": min(taken),
        "max_ms": max(taken),
        "ms": [round(value, 1) for value in taken],
        "ended_p50_ms": statistics.median(ended),
    }
    if besides:
        found["beside_ms"] = [round(value, 1) for value in besides]
        found["beside_p50_ms"] = statistics.median(besides)
        found["ratio_p50"] = statistics.median(
            ours / theirs for ours, theirs in zip(taken, besides, strict=True)
        )
    return found


def _launch_once(store: BenchStore, client: Client, root: Path, launch: int) -> tuple[float, float]:
    """One launch onto a backlog of its own: ms to the first result seen, and to its end."""
    queue = f"bench-first-result-{launch}"
    first_id = enqueue_echo(client, queue, 0, BACKLOG)
    with _default_workers(store, root, queue) as (_, launched):
        wait_until(
            lambda: finished_count(client.store, queue) >= 1,
            60.0,
            "the first result after launch",
            interval=POLL_SECONDS,
        )
        seen = time.time()
    jobs = list(jobs_since(client.store, queue, first_id))
    first = min(job.finished_at for job in jobs if job.finished_at is not None)
    plan.run(client.store, job_cancel([job.id for job in jobs if job.finished_at is None]))
    return 1000 * (seen - launched), 1000 * (first - launched)


def start_cpu(store: BenchStore, root: Path, *, launches: int) -> dict[str, Any]:
    """CPU milliseconds 2 default workers and their pool children use to start, for each
    of ``launches``: until every worker has its pool children and they have gone idle."""
    totals: list[float] = []
    children: list[float] = []
    for launch in range(launches):
        with _default_workers(store, root, f"bench-start-cpu-{launch}") as (fleet, _):
            started = pool_children_idle(fleet.pids, least_each=1)
            wait_until(started, 60.0, "the workers' start", interval=SETTLE_SECONDS)
            total, sandboxes = _fleet_cpu(fleet.pids)
        totals.append(1000 * total)
        children.append(1000 * sandboxes)
    return {
        "launches": launches,
        "p50_ms": statistics.median(totals),
        "min_ms": min(totals),
        "max_ms": max(totals),
        "children_p50_ms": statistics.median(children),
        "ms": [round(value, 1) for value in totals],
    }


@contextmanager
def _default_workers(
    store: BenchStore, root: Path, queue: str
) -> Iterator[tuple[WorkerFleet, float]]:
    """2 workers with default settings serving ``queue``, and the wall time just before
    their launch; stopped on the way out."""
    directory = root / queue
    directory.mkdir(parents=True, exist_ok=True)
    args = ["--queues", queue, "--config", str(worker_config(directory))]
    env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
    fleet = WorkerFleet(directory, env=env)
    try:
        launched = time.time()
        for index in range(WORKERS):
            fleet.start(store.url, tag=f"{queue}-{index + 1}", args=args)
        yield fleet, launched
    finally:
        fleet.close()


def _fleet_cpu(pids: list[int]) -> tuple[float, float]:
    """CPU seconds of the workers with every process under them, and of those processes."""
    used = cpu_sample(pids, [])
    return used.worker_main + used.worker_threads + used.sandboxes, used.sandboxes
