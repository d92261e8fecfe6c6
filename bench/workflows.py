"""What workflows cost: a whole one submitted, and claims beside a million waiting jobs.

``python -m bench.workflows [--stores sqlite,rqlite] [--parts submit,fan-in,claim]
[--waiting N] [--rqlite-waiting N] [--fan-in-runs N] [--json FILE]``

1. submit: ``workflow_submit`` of 10,000 parents and one job after all of
   them (one request), against ``job_enqueue`` of 10,000 plain jobs (one
   request), taken in turn: pairs, whose ratios give the median and the
   spread; the medians of each side give the ratio. Target: the workflow
   at most 1.25x.
2. claim: a claim of 8 jobs (released again, untimed) in a queue of 1,000
   queued jobs, alone and beside N jobs of the same queue waiting on a parent
   that never runs. Target: at most 1.1x. Each case has a store of its own
   (an SQLite file; an rqlite cluster of 3 nodes), measured in turn sample
   by sample (N defaults to a million on SQLite, 100,000 on rqlite).
3. fan-in: with 2 real ``taskq-worker`` processes (pool isolation, the
   bench's slots per store) on the store, a workflow of 50 short parents and
   one fan-in after them, again and again; the delay from the last parent's
   end to the fan-in's start, both read by the jobs themselves from the
   machine's monotonic clock (``bench.jobs:ended``, ``bench.jobs:began``).
   In between, in blocks, the plain pickup of ``bench.end_to_end.pickup``
   (a job submitted to idle workers, to its first line), for the target:
   the fan-in's p99 within the pickup's p99. The fan-in runs in a queue of
   its own served by the same workers (``same queue``: the worker that
   reports the last parent may claim it in that report's write), and, in a
   second variant, in a queue only the other worker serves (``other
   worker``: it has to learn of the release from the store). A third, a
   chain of one parent and its child, shows the release alone. A fourth
   gives the 50 parents real lengths (10 to 59 ms of sleep each), so they end
   at their own times as a pipeline's do, not in one burst.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import claim_latency, fan_in, host_cpu
from bench.measure import DEFAULT_CONCURRENCY
from bench.stores import BenchStore, open_bench_store
from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import WorkflowSubmission
from taskq.broker.stores.store import Store

WIDTH = 10_000
SUBMIT_ROUNDS = 11
QUEUED = 1_000
PARENTS_QUEUE = "bench-never-run"
PARTS = ("submit", "fan-in", "claim")


def submit_pairs(store: Store, rounds: int = SUBMIT_ROUNDS) -> list[tuple[float, float]]:
    """(plain, workflow) seconds per round: a bulk enqueue, then a fan-in workflow as wide."""
    pairs = []
    for round_ in range(rounds):
        queue = f"bench-submit-{round_}"
        specs = [call_spec("bench.jobs:echo", [n], queue=queue) for n in range(WIDTH)]
        started = time.perf_counter()
        plan.run(store, job_enqueue(specs))
        plain = time.perf_counter() - started
        submission = WorkflowSubmission(
            jobs=(*specs, call_spec("bench.jobs:echo", ["fan-in"], queue=queue)),
            parents=(*[()] * WIDTH, tuple(range(WIDTH))),
        )
        started = time.perf_counter()
        plan.run(store, workflow_submit(submission))
        pairs.append((plain, time.perf_counter() - started))
    return pairs


def submit_figures(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    ratios = sorted(workflow / plain for plain, workflow in pairs)
    plain = statistics.median(p for p, _ in pairs)
    workflow = statistics.median(w for _, w in pairs)
    return {
        "pairs": len(pairs),
        "plain_ms": round(plain * 1000, 1),
        "workflow_ms": round(workflow * 1000, 1),
        "plain_ms_range": [
            round(min(p for p, _ in pairs) * 1000),
            round(max(p for p, _ in pairs) * 1000),
        ],
        "workflow_ms_range": [
            round(min(w for _, w in pairs) * 1000),
            round(max(w for _, w in pairs) * 1000),
        ],
        "ratio_of_medians": round(workflow / plain, 3),
        "pair_ratio_median": round(statistics.median(ratios), 3),
        "pair_ratio_quartiles": [round(q, 3) for q in statistics.quantiles(ratios, n=4)[::2]],
        "pair_ratio_range": [round(ratios[0], 3), round(ratios[-1], 3)],
    }


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


def claim_figures(claims: dict[int, float], waiting: int) -> dict[str, Any]:
    return {
        "queued": QUEUED,
        "waiting": waiting,
        "none_waiting_p50_ms": round(claims[0], 3),
        "waiting_p50_ms": round(claims[waiting], 3),
        "ratio": round(claims[waiting] / claims[0], 3),
    }


class Run:
    """What one store's run measures, as the options ask."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.parts = set(args.parts.split(","))
        self.root = root
        self.fan_in_runs = args.fan_in_runs
        self.figures: dict[str, dict[str, Any]] = {}

    def submit(self, name: str, store: Store) -> None:
        if "submit" in self.parts:
            _say(f"[{name}] submit: {SUBMIT_ROUNDS} pairs of {WIDTH:,} jobs")
            self.figures.setdefault(name, {})["submit"] = submit_figures(submit_pairs(store))

    def fan_in(self, name: str, bench_store: BenchStore) -> None:
        if "fan-in" in self.parts:
            _say(f"[{name}] fan-in: {self.fan_in_runs} runs of each variant, with pickups")
            measured = fan_in.measure(
                bench_store,
                self.root / f"fan-in-{name}",
                concurrency=DEFAULT_CONCURRENCY[name],
                runs=self.fan_in_runs,
                blocks=4,
            )
            self.figures.setdefault(name, {})["fan_in"] = measured.summary(
                store_times=name == "sqlite"
            )


def bench_sqlite(run: Run, waiting: int) -> None:
    if "claim" in run.parts:
        urls = {count: f"sqlite://{run.root / f'claims-{count}.db'}" for count in (0, waiting)}
        for count, url in urls.items():
            _filled(url, count)
        stores = {count: open_store(url) for count, url in urls.items()}
        try:
            claims = claim_medians(stores)
        finally:
            for store in stores.values():
                store.close()
        run.figures.setdefault("sqlite", {})["claim"] = claim_figures(claims, waiting)
    with open_bench_store("sqlite", run.root) as bench_store:
        store = open_store(bench_store.url)
        try:
            run.submit("sqlite", store)
        finally:
            store.close()
        run.fan_in("sqlite", bench_store)


def bench_rqlite(run: Run, waiting: int) -> None:
    with open_bench_store("rqlite", run.root) as bench_store:
        store = open_store(bench_store.url)
        try:
            run.submit("rqlite", store)
            run.fan_in("rqlite", bench_store)
            if "claim" in run.parts:
                # A second cluster holds the waiting jobs: the two are measured in
                # turn, sample by sample, so that the machine's load weighs on both alike.
                with open_bench_store("rqlite", run.root / "waiting") as waiting_bench:
                    _filled(bench_store.url, 0)
                    _filled(waiting_bench.url, waiting)
                    waiting_store = open_store(waiting_bench.url)
                    try:
                        claims = claim_medians({0: store, waiting: waiting_store})
                    finally:
                        waiting_store.close()
                run.figures.setdefault("rqlite", {})["claim"] = claim_figures(claims, waiting)
        finally:
            store.close()


def machine() -> dict[str, Any]:
    """What the figures ran on: CPUs, their model, and the load average now."""
    model = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                "?",
            )
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "load_average": list(os.getloadavg())}


def _report(name: str, figures: dict[str, Any]) -> None:
    if "submit" in figures:
        sub = figures["submit"]
        print(f"[{name}] submit of {WIDTH:,} jobs, {sub['pairs']} interleaved pairs, medians:")
        plain, workflow = sub["plain_ms"], sub["workflow_ms"]
        print(f"  job_enqueue, plain jobs            {plain:9.1f} ms  {sub['plain_ms_range']}")
        print(
            f"  workflow_submit, {WIDTH:,} -> 1       {workflow:9.1f} ms  "
            f"{sub['workflow_ms_range']}"
        )
        print(
            f"  workflow / plain                   {sub['ratio_of_medians']:9.2f}x   "
            f"(pairs: median {sub['pair_ratio_median']:.2f}x, quartiles "
            f"{sub['pair_ratio_quartiles']}, range {sub['pair_ratio_range']}; target <= 1.25)"
        )
    if "fan_in" in figures:
        fig = figures["fan_in"]
        print(f"[{name}] fan-in of {fan_in.PARENTS} parents, last parent's end to fan-in's start:")
        for key, label in (
            ("pickup", "plain pickup (submit to start)"),
            ("same_queue", "fan-in, same queue"),
            ("other_worker", "fan-in, other worker's queue"),
            ("chain", "chain of one parent, same queue"),
            ("real_length", "fan-in, parents of 10-59 ms"),
        ):
            row = fig[key]
            print(
                f"  {label:34} p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  "
                f"(max {row['max_ms']:.2f}, {row['samples']} samples)"
            )
            if "median_split_ms" in row:
                split = row["median_split_ms"]
                print(
                    f"  {'':34} median split: end to report {split['to_report']:.2f}, "
                    f"to claim {split['to_claim']:.2f}, to start {split['to_start']:.2f} ms"
                )
            if "from_write" in row:
                ended = row["from_write"]
                print(
                    f"  {'':34} from the write:  p50 {ended['p50_ms']:7.2f} ms  "
                    f"p99 {ended['p99_ms']:7.2f} ms  (max {ended['max_ms']:.2f})"
                )
    if "claim" in figures:
        claim = figures["claim"]
        print(f"[{name}] claim of {claim_latency.CLAIM_LIMIT} among {QUEUED:,} queued, p50:")
        print(f"  no waiting jobs                    {claim['none_waiting_p50_ms']:9.2f} ms")
        print(f"  {claim['waiting']:,} waiting jobs          {claim['waiting_p50_ms']:9.2f} ms")
        print(f"  with / without                     {claim['ratio']:9.2f}x   (target <= 1.1)")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workflows", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--stores", default="sqlite", help="sqlite, rqlite or both (comma)")
    parser.add_argument("--parts", default=",".join(PARTS), help="submit, fan-in, claim (comma)")
    parser.add_argument("--waiting", type=int, default=1_000_000, help="waiting jobs, SQLite")
    parser.add_argument("--rqlite-waiting", type=int, default=100_000, help="the same, rqlite")
    parser.add_argument("--fan-in-runs", type=int, default=40, help="runs of each fan-in variant")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"no part {sorted(unknown)}")
    report: dict[str, Any] = {"machine_before": machine()}
    host_before = host_cpu.read()
    with tempfile.TemporaryDirectory(prefix="taskq-bench-workflows-") as directory:
        run = Run(args, Path(directory))
        for name in args.stores.split(","):
            if name == "sqlite":
                bench_sqlite(run, args.waiting)
            elif name == "rqlite":
                bench_rqlite(run, args.rqlite_waiting)
            else:
                parser.error(f"no store kind {name!r}")
    host = host_cpu.shares(host_before, host_cpu.read())
    report |= {
        "machine_after": machine(),
        "host_cpu_over_the_run": {kind: round(share, 3) for kind, share in host.items()},
        "stores": run.figures,
    }
    print(
        f"machine: {report['machine_before']['cpus']} CPUs, {report['machine_before']['cpu_model']}"
    )
    print(
        f"load average (1, 5, 15 min) before {report['machine_before']['load_average']}, "
        f"after {report['machine_after']['load_average']}"
    )
    if host:
        print(
            f"of the machine's CPU time over the run: {host['steal']:.1%} stolen by its host, "
            f"{host['idle']:.1%} idle"
        )
    for name, figures in run.figures.items():
        _report(name, figures)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
