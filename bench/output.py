"""Live output: how soon a print shows to a follower, what it costs the store, and the drain.

For each store (a fresh SQLite file; a 3-node rqlite cluster on loopback),
with 2 real ``taskq-worker`` processes in pool isolation (default settings):

1. delay from print to follower: a job prints a line with ``time.time()``
   every 100 ms (``bench.jobs:print_stamps``); this process follows it with
   ``Client.output(follow=True)`` (polling every 50 ms at most) and takes, for
   each line, the time it was read minus the time it was printed (p50, p99);
2. store writes per second per printing job: while that job printed, how
   many writes carried its output (each write holds one chunk of a job that
   prints less than 64 KiB an interval; the attempt's stored chunks count
   them), over the job's run time;
3. drain of no-op jobs that print one line each (``bench.jobs:say``) against
   jobs that print nothing (``bench.jobs:echo``), measured as ``python -m
   bench`` measures drain (from the first claim to the last finish, the
   store's times), in pairs of rounds whose order alternates, so that the
   machine's load weighs on both alike: the cost is the median of the
   pairs' costs, in jobs a second and in CPU time a job (the workers, their
   children and the store's servers; a shared machine's load moves the rate
   far more than it moves the CPU a job takes).

    .venv/bin/python -m bench.output [--stores sqlite,rqlite] [--jobs 5000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import percentile, say
from bench.end_to_end import ECHO, draining_workers, running_workers, wait_started
from bench.stores import open_bench_store
from taskq.broker.client.client import Client, call_spec
from taskq.broker.records import OutputText

SAY = "bench.jobs:say"
STAMPS = "bench.jobs:print_stamps"
CONCURRENCY = 4


def follow_delays(client: Client, queue: str, lines: int) -> dict[str, float]:
    """Delays (ms) from each printed line to this follower reading it; writes a second."""
    handle = client.submit_spec(call_spec(STAMPS, [lines, 0.1], queue=queue))
    delays: list[float] = []
    for piece in client.output(handle.id, follow=True, poll_seconds=0.05):
        if not isinstance(piece, OutputText):
            continue
        read_at = time.time()
        for line in piece.text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "stamp":
                delays.append((read_at - float(parts[2])) * 1000)
    [execution] = client.executions(handle.id)
    chunks = sum(1 for piece in client.output(handle.id) if isinstance(piece, OutputText))
    ran = (execution.finished_at or 0.0) - execution.started_at
    return {
        "lines": len(delays),
        "p50_ms": percentile(delays, 0.50),
        "p99_ms": percentile(delays, 0.99),
        "writes_per_second": chunks / ran if ran > 0 else float("nan"),
    }


def drain_rate(
    store: Any, client: Client, root: Path, queue: str, target: str, jobs: int
) -> tuple[float, float]:
    """Jobs a second, first claim to last finish, of ``jobs`` queued calls of ``target``; and
    the CPU ms a job cost the workers, their children and the store's servers meanwhile."""
    ids = [
        handle.id
        for start in range(0, jobs, 1000)
        for handle in client.submit_many(
            [call_spec(target, [n], queue=queue) for n in range(start, min(jobs, start + 1000))]
        )
    ]
    with draining_workers(
        store,
        client,
        root,
        queue=queue,
        first_id=ids[0],
        jobs=jobs,
        concurrency=CONCURRENCY,
        isolation="pool",
    ) as (_, drain):
        used = drain.cpu
        cpu = used.worker_main + used.worker_threads + used.sandboxes + used.store_server
        return drain.rate, cpu * 1000 / jobs


def bench_store(name: str, root: Path, jobs: int, rounds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with open_bench_store(name, root / name) as store:
        client = Client(store.url)
        try:
            with running_workers(
                store, root / "follow", queue="bench-out", concurrency=1, isolation="pool"
            ) as fleet:
                wait_started(fleet)
                figures["follow"] = follow_delays(client, "bench-out", lines=100)
                say(f"[{name}] follow: {figures['follow']}")
            rates: dict[str, list[float]] = {"echo": [], "say": []}
            cpu: dict[str, list[float]] = {"echo": [], "say": []}
            for index in range(rounds):
                # Each pair's order alternates: a machine that slows or speeds up
                # through a pair weighs on echo and say alike over the rounds.
                kinds = (("echo", ECHO), ("say", SAY))
                for kind, target in kinds if index % 2 == 0 else kinds[::-1]:
                    queue = f"bench-{kind}-{index}"
                    rate, ms = drain_rate(store, client, root / queue, queue, target, jobs)
                    rates[kind].append(rate)
                    cpu[kind].append(ms)
                    say(
                        f"[{name}] drain {kind} round {index + 1}: "
                        f"{rate:.0f} jobs/s, {ms:.3f} CPU ms/job"
                    )
            echo, printing = statistics.median(rates["echo"]), statistics.median(rates["say"])
            pair_costs = [1 - s / e for e, s in zip(rates["echo"], rates["say"], strict=True)]
            cpu_costs = [s / e - 1 for e, s in zip(cpu["echo"], cpu["say"], strict=True)]
            figures["drain"] = {
                "echo_jobs_per_second": echo,
                "say_jobs_per_second": printing,
                "cost": 1 - printing / echo,
                "cost_pair_median": statistics.median(pair_costs),
                "cpu_ms_per_job": {kind: statistics.median(v) for kind, v in cpu.items()},
                "cpu_cost_pair_median": statistics.median(cpu_costs),
                "rounds": rates,
                "cpu_rounds": cpu,
            }
        finally:
            client.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,rqlite")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="taskq-bench-output-") as directory:
        for name in args.stores.split(","):
            figures = bench_store(name, Path(directory), args.jobs, args.rounds)
            print(name, figures)


if __name__ == "__main__":
    main()
