"""Latency of the broker's hot operations at a small and a huge backlog (the first bench).

At each backlog size it measures, over 200 runs each, the median and 99th
percentile of:

* a claim of 8 jobs. The claimed jobs are released at once (in one request,
  not timed), so the backlog stays the size being measured;
* a requeue of expired leases when none has expired (the reaper's idle tick);
* ``job_counts`` (what the console polls every second).

The backlog is filled through the broker's own bulk enqueue, 10,000 jobs per
request, and the fill rate is reported too.

Where each size has a store of its own (SQLite files), the sizes are measured
in turn sample by sample, after the fills' writes have reached the disk: a
commit's fsync varies by tens of percent from minute to minute, and measured
one size after the other (the large one right after its fill, while the
kernel still writes it back) that drift would show as a cost of the backlog.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.leases import Report, ReportKind, job_report
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import job_counts
from taskq.broker.records import AttemptReport
from taskq.broker.stores.store import Store

QUEUE = "bench-claim"
WORKER = "bench-worker"
ENQUEUE_BATCH = 10_000
CLAIM_LIMIT = 8
SAMPLES = 200
WARMUP = 10
LEASE_SECONDS = 300.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Latency:
    """One operation measured at one backlog size, in milliseconds."""

    backlog: int
    operation: str
    p50_ms: float
    p99_ms: float
    max_ms: float
    samples: int


@dataclass(frozen=True, slots=True)
class Fill:
    """How fast the backlog was filled through bulk enqueue."""

    jobs: int
    seconds: float
    batch: int

    @property
    def jobs_per_second(self) -> float:
        return self.jobs / self.seconds if self.seconds else math.inf


def _percentile(sorted_values: list[float], fraction: float) -> float:
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def measure_in_turn(operation: str, steps: dict[int, Callable[[], float]]) -> list[Latency]:
    """Run each backlog's step once in turn, WARMUP + SAMPLES rounds; one latency per backlog."""
    for _ in range(WARMUP):
        for step in steps.values():
            step()
    timings: dict[int, list[float]] = {backlog: [] for backlog in steps}
    for _ in range(SAMPLES):
        for backlog, step in steps.items():
            timings[backlog].append(step() * 1000)
    return [_latency(backlog, operation, sorted(taken)) for backlog, taken in timings.items()]


def _latency(backlog: int, operation: str, timings: list[float]) -> Latency:
    return Latency(
        backlog=backlog,
        operation=operation,
        p50_ms=_percentile(timings, 0.50),
        p99_ms=_percentile(timings, 0.99),
        max_ms=timings[-1],
        samples=len(timings),
    )


def timed(store: Store, op: Op[T]) -> tuple[T, float]:
    started = time.perf_counter()
    value = plan.run(store, op)
    return value, time.perf_counter() - started


def fill_to(store: Store, current: int, target: int) -> Fill:
    """Enqueue jobs until the queue holds ``target``; time the whole fill."""
    started = time.perf_counter()
    for first in range(current, target, ENQUEUE_BATCH):
        specs = [
            call_spec("bench.jobs:echo", [number], queue=QUEUE)
            for number in range(first, min(first + ENQUEUE_BATCH, target))
        ]
        plan.run(store, job_enqueue(specs))
        if target - current > ENQUEUE_BATCH:
            done = first + len(specs) - current
            rate = done / (time.perf_counter() - started)
            print(
                f"\r  filling: {current + done:,} of {target:,} ({rate:,.0f} jobs/s)",
                end="",
                file=sys.stderr,
            )
            sys.stderr.flush()
    if target - current > ENQUEUE_BATCH:
        print(file=sys.stderr)
    return Fill(jobs=target - current, seconds=time.perf_counter() - started, batch=ENQUEUE_BATCH)


def claim_then_release(store: Store) -> float:
    """Time one claim of CLAIM_LIMIT jobs, then give them back untimed."""
    claimed, seconds = timed(
        store,
        job_claim(WORKER, [QUEUE], limit=CLAIM_LIMIT, lease_seconds=LEASE_SECONDS),
    )
    if len(claimed) != CLAIM_LIMIT:
        raise RuntimeError(f"a claim found {len(claimed)} jobs, expected {CLAIM_LIMIT}")
    released = AttemptReport(outcome="released")
    reports = [Report(job.lease, ReportKind.RELEASE, released) for job in claimed]
    plan.run(store, job_report(reports))
    return seconds


def queued_jobs(store: Store) -> int:
    for stats in plan.run(store, job_counts()):
        if stats.queue == QUEUE:
            return sum(stats.counts.values())
    return 0


def measure_backlogs(stores: dict[int, Store]) -> list[Latency]:
    """Each operation at each backlog (``stores``: the store holding it), backlogs in turn."""
    for backlog, store in stores.items():
        if queued_jobs(store) != backlog:
            raise RuntimeError(f"expected {backlog:,} jobs, found {queued_jobs(store):,}")

    def each(step: Callable[[Store], float]) -> dict[int, Callable[[], float]]:
        return {backlog: partial(step, store) for backlog, store in stores.items()}

    return [
        *measure_in_turn(f"claim (limit={CLAIM_LIMIT})", each(claim_then_release)),
        *measure_in_turn(
            "requeue expired (none)",
            each(lambda store: timed(store, job_requeue_expired())[1]),
        ),
        *measure_in_turn("job_counts", each(lambda store: timed(store, job_counts())[1])),
    ]


def _filled(url: str, current: int, size: int) -> Fill:
    store = open_store(url)
    try:
        return fill_to(store, current, size)
    finally:
        # Closing checkpoints the write-ahead log the bulk fill left behind,
        # so the measurement starts where a long-running store would be.
        store.close()


def run(sizes: list[int], url: str) -> tuple[list[Latency], list[Fill]]:
    """Fill one store's QUEUE to each size in turn and measure at each."""
    results: list[Latency] = []
    fills: list[Fill] = []
    current = 0
    for size in sizes:
        fills.append(_filled(url, current, size))
        current = size
        print(f"  measuring claims at {size:,} queued jobs", file=sys.stderr)
        store = open_store(url)
        try:
            results += measure_backlogs({size: store})
        finally:
            store.close()
    return results, fills


def run_side_by_side(urls: dict[int, str]) -> tuple[list[Latency], list[Fill]]:
    """Fill a store of its own to each size (``urls``), then measure them in turn."""
    fills = [_filled(url, 0, size) for size, url in urls.items()]
    os.sync()  # the fills' pages reach the disk before any commit is timed
    print(
        f"  measuring claims at {', '.join(f'{size:,}' for size in urls)} queued jobs, in turn",
        file=sys.stderr,
    )
    with ExitStack() as stack:
        stores = {size: open_store(url) for size, url in urls.items()}
        for store in stores.values():
            stack.callback(store.close)
        return measure_backlogs(stores), fills
