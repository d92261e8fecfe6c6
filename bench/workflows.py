"""What workflows cost: a whole one submitted, and claims beside a million waiting jobs.

``python -m bench.workflows [--stores sqlite,rqlite] [--waiting N] [--rqlite-waiting N]``

1. submit: ``workflow_submit`` of 10,000 parents and one job after all of
   them (one request), against ``job_enqueue`` of 10,000 plain jobs (one
   request), taken in turn, each the median of several rounds. Target: the
   workflow at most 1.25x.
2. claim: a claim of 8 jobs (released again, untimed) in a queue of 1,000
   queued jobs, alone and beside N jobs of the same queue waiting on a parent
   that never runs. Target: at most 1.1x. On SQLite each case has a file of
   its own, measured in turn sample by sample; the rqlite cluster's one store
   is measured before and after the waiting jobs are added (N defaults to a
   million on SQLite, 100,000 on rqlite).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import claim_latency
from bench.stores import open_bench_store
from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import WorkflowSubmission
from taskq.broker.stores.store import Store

WIDTH = 10_000
SUBMIT_ROUNDS = 7
QUEUED = 1_000
PARENTS_QUEUE = "bench-never-run"


def submit_ratio(store: Store) -> tuple[float, float]:
    """Median seconds of a plain bulk enqueue and of a fan-in workflow, the same width."""
    plain: list[float] = []
    workflow: list[float] = []
    for round_ in range(SUBMIT_ROUNDS):
        queue = f"bench-submit-{round_}"
        specs = [call_spec("bench.jobs:echo", [n], queue=queue) for n in range(WIDTH)]
        started = time.perf_counter()
        plan.run(store, job_enqueue(specs))
        plain.append(time.perf_counter() - started)
        submission = WorkflowSubmission(
            jobs=(*specs, call_spec("bench.jobs:echo", ["fan-in"], queue=queue)),
            parents=(*[()] * WIDTH, tuple(range(WIDTH))),
        )
        started = time.perf_counter()
        plan.run(store, workflow_submit(submission))
        workflow.append(time.perf_counter() - started)
    return statistics.median(plain), statistics.median(workflow)


def add_waiting(store: Store, count: int) -> None:
    """``count`` jobs of the claim queue, each waiting on a parent that is never claimed."""
    added = 0
    started = time.perf_counter()
    while added < count:
        children = min(WIDTH - 1, count - added)
        submission = WorkflowSubmission(
            jobs=(
                call_spec("bench.jobs:echo", ["parent"], queue=PARENTS_QUEUE),
                *[
                    call_spec("bench.jobs:echo", [n], queue=claim_latency.QUEUE)
                    for n in range(children)
                ],
            ),
            parents=((), *[(0,)] * children),
        )
        plan.run(store, workflow_submit(submission))
        added += children
        rate = added / (time.perf_counter() - started)
        print(f"\r  waiting jobs: {added:,} of {count:,} ({rate:,.0f}/s)", end="", file=sys.stderr)
    print(file=sys.stderr)


def _filled(url: str, waiting: int) -> None:
    store = open_store(url)
    try:
        claim_latency.fill_to(store, 0, QUEUED)
        add_waiting(store, waiting)
    finally:
        store.close()


def claim_medians(stores: dict[int, Store]) -> dict[int, float]:
    """The median claim, in ms, in each store (by its waiting count), measured in turn."""
    steps: dict[int, Callable[[], float]] = {
        waiting: partial(claim_latency.claim_then_release, store)
        for waiting, store in stores.items()
    }
    latencies = claim_latency.measure_in_turn("claim", steps)
    return {latency.backlog: latency.p50_ms for latency in latencies}


def bench_sqlite(root: Path, waiting: int) -> None:
    urls = {count: f"sqlite://{root / f'claims-{count}.db'}" for count in (0, waiting)}
    for count, url in urls.items():
        _filled(url, count)
    stores = {count: open_store(url) for count, url in urls.items()}
    try:
        claims = claim_medians(stores)
    finally:
        for store in stores.values():
            store.close()
    with open_bench_store("sqlite", root) as bench_store:
        store = open_store(bench_store.url)
        try:
            plain, workflow = submit_ratio(store)
        finally:
            store.close()
    _report("sqlite", plain, workflow, claims, waiting)


def bench_rqlite(root: Path, waiting: int) -> None:
    with open_bench_store("rqlite", root) as bench_store:
        store = open_store(bench_store.url)
        try:
            plain, workflow = submit_ratio(store)
            claim_latency.fill_to(store, 0, QUEUED)
            claims = claim_medians({0: store})
            add_waiting(store, waiting)
            claims |= claim_medians({waiting: store})
        finally:
            store.close()
    _report("rqlite", plain, workflow, claims, waiting)


def _report(
    name: str, plain: float, workflow: float, claims: dict[int, float], waiting: int
) -> None:
    print(f"[{name}] submit of {WIDTH:,} jobs, median of {SUBMIT_ROUNDS}:")
    print(f"  job_enqueue, plain jobs            {plain * 1000:9.1f} ms")
    print(f"  workflow_submit, {WIDTH:,} -> 1       {workflow * 1000:9.1f} ms")
    ratio = workflow / plain
    print(f"  workflow / plain                   {ratio:9.2f}x   (target <= 1.25)")
    print(f"[{name}] claim of {claim_latency.CLAIM_LIMIT} among {QUEUED:,} queued, p50:")
    print(f"  no waiting jobs                    {claims[0]:9.2f} ms")
    print(f"  {waiting:,} waiting jobs          {claims[waiting]:9.2f} ms")
    ratio = claims[waiting] / claims[0]
    print(f"  with / without                     {ratio:9.2f}x   (target <= 1.1)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workflows", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--stores", default="sqlite", help="sqlite, rqlite or both (comma)")
    parser.add_argument("--waiting", type=int, default=1_000_000, help="waiting jobs, SQLite")
    parser.add_argument("--rqlite-waiting", type=int, default=100_000, help="the same, rqlite")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="taskq-bench-workflows-") as directory:
        root = Path(directory)
        for name in args.stores.split(","):
            if name == "sqlite":
                bench_sqlite(root, args.waiting)
            elif name == "rqlite":
                bench_rqlite(root, args.rqlite_waiting)
            else:
                parser.error(f"no store kind {name!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
