"""Latency of the broker's hot operations at a small and a huge backlog (the first bench).

At each backlog size it measures, over 200 runs each, the median and 99th
percentile of:

* a claim of 8 jobs. The claimed jobs are released at once (in one request,
  not timed), so the backlog stays the size being measured;
* a requeue of expired leases when none has expired (the reaper's idle tick);
* ``job_counts`` (what the console polls every second).

The backlog is filled through the broker's own bulk enqueue, 10,000 jobs per
request, and the fill rate is reported too.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from taskq.broker import operations, plan
from taskq.broker.client import call_spec
from taskq.broker.connect import open_store
from taskq.broker.plan import Op
from taskq.broker.records import AttemptReport
from taskq.broker.store import Store

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


def measure(backlog: int, operation: str, step: Callable[[], float]) -> Latency:
    """Run ``step`` (which returns the seconds it timed) WARMUP + SAMPLES times."""
    for _ in range(WARMUP):
        step()
    timings = sorted(step() * 1000 for _ in range(SAMPLES))
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
            call_spec("bench_jobs:echo", [number], queue=QUEUE)
            for number in range(first, min(first + ENQUEUE_BATCH, target))
        ]
        plan.run(store, operations.job_enqueue(specs))
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
        operations.job_claim(WORKER, [QUEUE], limit=CLAIM_LIMIT, lease_seconds=LEASE_SECONDS),
    )
    if len(claimed) != CLAIM_LIMIT:
        raise RuntimeError(f"a claim found {len(claimed)} jobs, expected {CLAIM_LIMIT}")
    released = AttemptReport(outcome="released")
    reports = [
        operations.Report(job.lease, operations.Verdict.RELEASE, released) for job in claimed
    ]
    plan.run(store, operations.job_report(reports))
    return seconds


def queued_jobs(store: Store) -> int:
    for stats in plan.run(store, operations.job_counts()):
        if stats.queue == QUEUE:
            return sum(stats.counts.values())
    return 0


def measure_backlog(store: Store, backlog: int) -> list[Latency]:
    if queued_jobs(store) != backlog:
        raise RuntimeError(f"expected {backlog:,} jobs, found {queued_jobs(store):,}")
    return [
        measure(backlog, f"claim (limit={CLAIM_LIMIT})", lambda: claim_then_release(store)),
        measure(
            backlog,
            "requeue expired (none)",
            lambda: timed(store, operations.job_requeue_expired())[1],
        ),
        measure(backlog, "job_counts", lambda: timed(store, operations.job_counts())[1]),
    ]


def run(sizes: list[int], url: str) -> tuple[list[Latency], list[Fill]]:
    """Fill one store's QUEUE to each size in turn and measure at each."""
    results: list[Latency] = []
    fills: list[Fill] = []
    current = 0
    for size in sizes:
        store = open_store(url)
        try:
            fills.append(fill_to(store, current, size))
        finally:
            # Closing checkpoints the write-ahead log the bulk fill left behind,
            # so the measurement starts where a long-running store would be.
            store.close()
        current = size
        print(f"  measuring claims at {size:,} queued jobs", file=sys.stderr)
        store = open_store(url)
        try:
            results += measure_backlog(store, size)
        finally:
            store.close()
    return results, fills
