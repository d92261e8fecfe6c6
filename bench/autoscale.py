"""``taskq-worker --autoscale 1,8`` against a fixed ``--concurrency 1``, on a backlog of sleeps.

    .venv/bin/python -m bench.autoscale [--jobs 200] [--seconds 1.0]
        [--store sqlite|rqlite] [--json FILE]

The scenario of the autoscaling issue, at full size: ``--jobs`` jobs that each
sleep ``--seconds`` are queued before a worker starts, then one worker started
with ``--autoscale 1,8`` drains them; then the same backlog, on a second queue
of the same fresh store, is drained by one worker with a fixed
``--concurrency 1``. Both run with the worker's defaults (a config with only
the jobs' module) except ``prefetch = 0``: no job is claimed ahead, so the
attempts running in the store are the slots that are busy. Workers are
started and stopped by pid through :class:`taskq.dev.workers.WorkerFleet`.

Every number comes from the store's ``executions`` (each attempt's start and
end, in store time) and from the worker's ``slots_added`` event lines, not
from this process's clock: the drain span (first start to last end), the
most attempts running at once, and when that many were first running,
counted from the first start. The jobs sleep, so a busy machine lengthens
no job, only the gaps between them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import finished_count, jobs_pythonpath, say, wait_until
from bench.stores import BenchStore, open_bench_store
from taskq.broker.client.client import Client, call_spec
from taskq.broker.records import Execution
from taskq.dev.workers import WorkerFleet, environment_without

SLEEP = "bench.autoscale_jobs:sleep"
AUTOSCALE = (1, 8)


@dataclass
class Drain:
    """One worker's drain of the backlog, as the store recorded it."""

    worker: str  # the worker's options, as given
    jobs: int
    succeeded: int
    span_seconds: float  # first attempt's start to last attempt's end
    most_at_once: int
    most_first_at_seconds: (
        float | None
    )  # after the first start, when most_at_once was first reached
    slots_added: list[
        dict[str, Any]
    ]  # the worker's event lines, ts made relative to the first start


def most_at_once(executions: list[Execution]) -> tuple[int, float]:
    """The most attempts running at one moment, and the store time it was first reached."""
    edges = sorted(
        [(execution.started_at, 1) for execution in executions]
        + [(execution.finished_at or 0.0, -1) for execution in executions]
    )  # at equal times an end (-1) sorts before a start: touching is not overlapping
    running = most = 0
    first_at = 0.0
    for at, change in edges:
        running += change
        if running > most:
            most, first_at = running, at
    return most, first_at


def _config(root: Path) -> Path:
    """The worker's defaults, none of the user's: the jobs' module, no claiming ahead."""
    path = root / "worker.toml"
    path.write_text(
        '[worker]\nmodules = ["bench.autoscale_jobs"]\nprefetch = 0\n', encoding="utf-8"
    )
    return path


def drain(
    store: BenchStore, root: Path, *, queue: str, slots: list[str], jobs: int, seconds: float
) -> Drain:
    """Queue the backlog, start one worker with ``slots`` options on it, wait for the drain."""
    client = Client(store.url)
    specs = [call_spec(SLEEP, [seconds], queue=queue) for _ in range(jobs)]
    job_ids = [handle.id for handle in client.submit_many(specs)]
    env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
    args = ["--queues", queue, *slots, "--config", str(_config(root)), "--log-format", "json"]
    with WorkerFleet(root / queue, env=env) as fleet:
        worker = fleet.start(store.url, tag=queue, args=args)

        def drained() -> bool:
            if not worker.running:
                raise RuntimeError("the worker exited early:\n" + worker.describe())
            return finished_count(client.store, queue) >= jobs

        # A one-slot worker needs jobs * seconds; allow it twice that, and a minute to start.
        wait_until(drained, 60.0 + 2 * jobs * seconds, f"draining {jobs} jobs", interval=0.5)
        added = worker.events("slots_added")
    executions = [execution for job_id in job_ids for execution in client.executions(job_id)]
    succeeded = [execution for execution in executions if execution.outcome == "succeeded"]
    first_start = min(execution.started_at for execution in executions)
    last_end = max(execution.finished_at or 0.0 for execution in executions)
    most, most_at = most_at_once(executions)
    return Drain(
        worker=" ".join(slots),
        jobs=jobs,
        succeeded=len(succeeded),
        span_seconds=round(last_end - first_start, 3),
        most_at_once=most,
        most_first_at_seconds=round(most_at - first_start, 3),
        slots_added=[
            {**event, "ts": round(float(event["ts"]) - first_start, 3)} for event in added
        ],
    )


def run(store_name: str, jobs: int, seconds: float) -> dict[str, Any]:
    load_before = [round(value, 2) for value in os.getloadavg()]
    started = time.time()
    with (
        tempfile.TemporaryDirectory(prefix="taskq-bench-autoscale-") as tmp,
        open_bench_store(store_name, Path(tmp)) as store,
    ):
        low, high = AUTOSCALE
        say(f"{store.label}: {jobs} jobs of {seconds:g} s, --autoscale {low},{high}")
        scaled = drain(
            store,
            Path(tmp),
            queue="autoscale",
            slots=["--autoscale", f"{low},{high}"],
            jobs=jobs,
            seconds=seconds,
        )
        say(f"--autoscale: {scaled.span_seconds:.1f} s; now --concurrency 1")
        fixed = drain(
            store,
            Path(tmp),
            queue="fixed",
            slots=["--concurrency", "1"],
            jobs=jobs,
            seconds=seconds,
        )
    return {
        "store": store_name,
        "jobs": jobs,
        "job_seconds": seconds,
        "autoscale": asdict(scaled),
        "fixed": asdict(fixed),
        "speedup": round(fixed.span_seconds / scaled.span_seconds, 2),
        "wall_seconds": round(time.time() - started, 1),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_before": load_before,
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['jobs']} jobs of {result['job_seconds']:g} s on {result['store']}"
        f" ({result['cpus']} CPUs, load {result['load_average_before']}"
        f" before, {result['load_average_after']} after)",
    ]
    for key in ("autoscale", "fixed"):
        found = result[key]
        lines.append(
            f"  {found['worker']:<16} {found['succeeded']}/{found['jobs']} succeeded,"
            f" drained in {found['span_seconds']:.1f} s, {found['most_at_once']} at once"
            f" (first at {found['most_first_at_seconds']:.1f} s)"
        )
    for event in result["autoscale"]["slots_added"]:
        lines.append(
            f"    slots_added at {event['ts']:5.1f} s: +{event.get('added')}"
            f" -> {event.get('slots')}/{event.get('max')} (backlog {event.get('backlog')})"
        )
    lines.append(f"  speedup: {result['speedup']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoscale", description=__doc__)
    parser.add_argument("--jobs", type=int, default=200, help="jobs queued (default: 200)")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="how long each job sleeps (default: 1.0)"
    )
    parser.add_argument("--store", choices=("sqlite", "rqlite"), default="sqlite")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.seconds <= 0:
        parser.error("--jobs must be at least 1 and --seconds above 0")
    result = run(args.store, args.jobs, args.seconds)
    print(report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
