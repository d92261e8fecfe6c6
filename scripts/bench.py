"""Latency of the broker's hot operations on the SQLite store, at a small and a huge backlog.

At 1,000 and at 1,000,000 queued jobs (``--quick``: 1,000 and 100,000) it
measures, each over 200 runs, the median and 99th percentile of:

* a claim of 8 jobs. The claimed jobs are released at once (in one request,
  not timed), so the backlog stays the size being measured;
* a requeue of expired leases when none has expired (the reaper's idle tick);
* ``job_counts`` (what the console polls every second).

The backlog is filled through the broker's own bulk enqueue, 10,000 jobs per
request, and the fill rate is reported too. The store is a fresh file in a
temporary directory with the default options (WAL, synchronous=FULL).

    .venv/bin/python scripts/bench.py [--quick] [--json bench-results.json]

It prints a table and writes the numbers as JSON (default
``bench-results.json`` in the working directory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from taskq.broker import operations, plan
from taskq.broker.client import call_spec
from taskq.broker.connect import open_store
from taskq.broker.plan import Op
from taskq.broker.records import AttemptReport
from taskq.broker.store import Store

QUEUE = "bench"
WORKER = "bench-worker"
ENQUEUE_BATCH = 10_000
CLAIM_LIMIT = 8
SAMPLES = 200
WARMUP = 10
LEASE_SECONDS = 300.0
SMALL_BACKLOG = 1_000
LARGE_BACKLOG = 1_000_000
QUICK_LARGE_BACKLOG = 100_000

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


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
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
        p50_ms=percentile(timings, 0.50),
        p99_ms=percentile(timings, 0.99),
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
            call_spec("bench.jobs:work", [number], queue=QUEUE)
            for number in range(first, min(first + ENQUEUE_BATCH, target))
        ]
        plan.run(store, operations.job_enqueue(specs))
        if target - current > ENQUEUE_BATCH:
            done = first + len(specs) - current
            rate = done / (time.perf_counter() - started)
            print(f"\r  filling: {current + done:,} of {target:,} ({rate:,.0f} jobs/s)", end="")
            sys.stdout.flush()
    if target - current > ENQUEUE_BATCH:
        print()
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


def run(sizes: list[int], path: Path) -> tuple[list[Latency], list[Fill]]:
    """Fill one store to each size in turn and measure at each."""
    results: list[Latency] = []
    fills: list[Fill] = []
    current = 0
    for size in sizes:
        store = open_store(f"sqlite://{path}")
        try:
            fills.append(fill_to(store, current, size))
        finally:
            # Closing checkpoints the write-ahead log the bulk fill left behind,
            # so the measurement starts where a long-running store would be.
            store.close()
        current = size
        print(f"  measuring at {size:,} queued jobs")
        store = open_store(f"sqlite://{path}")
        try:
            results += measure_backlog(store, size)
        finally:
            store.close()
    return results, fills


def table(results: list[Latency], fills: list[Fill]) -> str:
    lines = [
        f"{'backlog':>10}  {'operation':<24} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'n':>5}"
    ]
    for result in results:
        lines.append(
            f"{result.backlog:>10,}  {result.operation:<24} {result.p50_ms:>8.2f} "
            f"{result.p99_ms:>8.2f} {result.max_ms:>8.2f} {result.samples:>5}"
        )
    for fill in fills:
        lines.append(
            f"fill: {fill.jobs:,} jobs in {fill.seconds:.1f} s = "
            f"{fill.jobs_per_second:,.0f} jobs/s (job_enqueue batches of {fill.batch:,})"
        )
    return "\n".join(lines)


def report(results: list[Latency], fills: list[Fill], quick: bool) -> dict[str, Any]:
    return {
        "store": "sqlite (WAL, synchronous=FULL)",
        "sqlite_version": sqlite3.sqlite_version,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": quick,
        "claim_limit": CLAIM_LIMIT,
        "samples": SAMPLES,
        "results": [asdict(result) for result in results],
        "fills": [
            {**asdict(fill), "jobs_per_second": round(fill.jobs_per_second)} for fill in fills
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"measure at {QUICK_LARGE_BACKLOG:,} instead of {LARGE_BACKLOG:,} jobs",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=Path("bench-results.json"),
        help="where to write the results (default: bench-results.json)",
    )
    args = parser.parse_args(argv)
    sizes = [SMALL_BACKLOG, QUICK_LARGE_BACKLOG if args.quick else LARGE_BACKLOG]
    with tempfile.TemporaryDirectory(prefix="taskq-bench-") as directory:
        load_before = os.getloadavg()[0]
        results, fills = run(sizes, Path(directory) / "bench.db")
        load_after = os.getloadavg()[0]
    print(table(results, fills))
    # Other processes on the machine skew latencies: say how busy it was.
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    summary = report(results, fills, args.quick)
    summary["load_average"] = {"before": load_before, "after": load_after}
    args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
