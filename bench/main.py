"""taskq's benchmark: enqueue, drain, steady state, pickup, claims, raw ceilings, sandbox.

For the embedded SQLite store (a fresh file in a temporary directory, WAL,
synchronous=FULL) and for a 3-node rqlite cluster that it starts on loopback
ports (and kills by pid when done), it measures:

1. enqueue rate: one ``Client.submit`` per job, the same from 8 threads
   sharing one client (their submits share writes), and ``submit_many`` in
   requests of 1,000 jobs;
2. drain throughput of a pre-enqueued backlog of no-op jobs (``bench.jobs:echo``
   returns its argument; results stored) by 2 real ``taskq-worker``
   processes, in ``pool`` isolation (20,000 jobs; once more with each
   worker pinned to a CPU of its own with ``--cpus``, for comparison;
   ``--pinned`` pins them throughout) and in ``process``
   isolation (500 jobs: a fresh interpreter per job is slow), from the first
   claim to the last job finished (and from the workers' start), with the
   write transactions it took and the CPU time of workers (main thread and
   other threads), sandbox children and rqlited; and reports and claims
   sent by one process with no worker at all ("broker only"), each request
   as full as a worker's can be (its slots and its default prefetch);
3. steady-state throughput while a client submits at a fixed rate (the issue's
   target for the store) in one request per 10 ms tick;
4. pickup latency p50/p99 with idle workers: 200 jobs submitted 20 ms apart,
   from just before the submit call to the job's first line (the job returns
   ``time.time()``); in process isolation 50 jobs 100 ms apart. Meanwhile a
   probe times a 4 KiB appending fsync on the store's disk every 20 ms, and
   the note says how many of the slow pickups met a slow fsync;
5. writes committed (and CPU used) while the 2 workers sit idle, against
   their heartbeats;
6. claim latency at 1,000 and 1,000,000 queued jobs (rqlite: 100,000 unless
   ``--rqlite-claim-backlog``), with requeue and ``job_counts`` latency and the
   fill rate: the first version of this bench. On SQLite each backlog has a
   file of its own and the two are measured in turn, sample by sample; the
   rqlite cluster's one backlog grows from the small size to the large;
7. the raw ceiling of the store: as many rows in batches of 1,000 with no
   broker logic (SQLite ``executemany`` into a two-column table, one
   transaction per batch, the same pragmas; rqlite ``/db/execute`` with 1,000
   statements per request, and with one multi-row INSERT per request), the
   same rows straight into taskq's own ``jobs`` table (its indexes and
   trigger, no broker logic), and one-row commits per second, back to back
   and 20 ms apart (the floor under a pickup, which waits for two: the
   submit's and the claim's); on SQLite, a whole pickup done with plain
   ``sqlite3`` by three processes (:mod:`bench.pickup_floor`);
8. per-job sandbox overhead in ``pool`` and ``process`` isolation, through
   ``PoolSandbox.run`` / ``Sandbox.run`` with no store;
9. the first result after launch: 2 workers with default settings started
   onto a queued backlog, as the peers' harness starts them, a few times
   (:mod:`bench.first_result`), and the CPU the same 2 workers and their
   pool children use to start; on SQLite, beside it, the same launch of 2
   bare Python workers in taskq's shape (:mod:`bench.first_result_floor`),
   one after each of taskq's;
10. submitting over HTTP on a fresh store of its own: ``POST /jobs`` on one
   connection beside ``Client.submit``, the request's floor (``GET
   /healthz``) and the server's CPU per request (:mod:`bench.http`, its
   rows named ``http.*``).

Each store's phases are in :mod:`bench.measure`; this module holds the
options, the table and the profile mode.

    .venv/bin/python -m bench [--quick] [--stores sqlite,rqlite] [--pinned] [--json FILE]
    .venv/bin/python -m bench --profile DIR [--stores sqlite]

Workers run 4 slots each on SQLite and 16 on rqlite (``--concurrency`` sets
another count): a write costs about the same whatever its size (an fsync
under SQLite's write lock, milliseconds of CPU across an rqlite cluster), so
fuller batches are what raise throughput, up to where more sandbox children
cost more than they save.

``--quick`` is a sanity run (under a minute, small numbers). rqlited comes
from ``TASKQ_RQLITED``, PATH, or the cache ``scripts/install_rqlite.sh``
builds into. It prints a table (progress goes to stderr) and writes JSON
(default ``bench-results.json`` in the working directory). ``--profile DIR`` instead
drains a backlog with the first worker under cProfile and prints where its
time goes, with the CPU time of its main thread and of its other threads.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import pstats
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import end_to_end, host_cpu
from bench.common import (
    Result,
    cpu_note,
    main_thread_cpu,
    process_cpu,
    say,
)
from bench.end_to_end import (
    WORKERS,
    draining_workers,
    enqueue_echo,
)
from bench.measure import BULK_BATCH, DEFAULT_CONCURRENCY, STEADY_RATE, Sizes, bench_store
from bench.sandbox import sandbox_overhead
from bench.stores import open_bench_store
from taskq.broker.client.client import Client
from taskq.worker.settings import WorkerSettings

# The goals of the performance issues (7, then 31 and 44 where stricter), by (result key, store).
# Issues 31 and 44 set most of their goals against the peers (../shared/peers-bench) or the
# store's own floors: those show here by what they compare with.
TARGETS: dict[tuple[str, str], str] = {
    ("enqueue.single", "sqlite"): ">= Huey on SQLite",
    ("ratio.single_vs_commits", "rqlite"): ">= 0.7",
    ("enqueue.threads", "sqlite"): ">= 5x one thread",
    ("enqueue.threads", "rqlite"): ">= 5x one thread",
    ("enqueue.bulk", "sqlite"): ">= 20,000",
    ("drain.pool", "sqlite"): ">= 4,000",
    ("drain.pool", "rqlite"): ">= 1,000",
    ("ratio.pickup_vs_floor", "sqlite"): "<= 2",
    ("pickup.pool.p99", "sqlite"): "<= 20",
    ("ratio.pickup_vs_floor", "rqlite"): "<= 2",
    ("pickup.pool.p99", "rqlite"): "<= 60",
    ("idle.writes", "rqlite"): "heartbeats only",
    ("idle.writes", "sqlite"): "heartbeats only",
    ("claim.ratio", "sqlite"): "<= 1.3",
    # Issue 44: no later than Huey's in the peers' harness (0.21-0.24 s there).
    ("start.first_result", "sqlite"): "<= Huey (~210 ms)",
    ("http.ratio.http_vs_client_single", "sqlite"): ">= 0.8",
    ("http.ratio.http_vs_client_single", "rqlite"): ">= 0.8",
    ("http.ratio.http_bare_vs_client_single", "sqlite"): ">= 0.8",
    ("http.ratio.http_bare_vs_client_single", "rqlite"): ">= 0.8",
}


# -- machine facts --------------------------------------------------------------------------


def machine_facts() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_before": [round(value, 2) for value in os.getloadavg()],
    }


def _host_said(host: dict[str, float]) -> str:
    """The run's steal and idle shares, as the footer says them (nothing without /proc)."""
    if not host:
        return ""
    return (
        f"; of the machine's CPU time over the run, {host['steal']:.1%} stolen by its host "
        f"and {host['idle']:.1%} idle (each figure's own in the JSON: host_steal, host_idle)"
    )


# -- the table --------------------------------------------------------------------------------

ROWS: list[tuple[str, str]] = [
    ("enqueue.single", "enqueue, one submit() per job"),
    ("enqueue.single.cpu", "  submitter's CPU per submit()"),
    ("enqueue.single.wal_pages", "  WAL pages per submit()"),
    ("enqueue.single_write", "  its store write alone, job built once"),
    ("enqueue.threads", "  submit() from 8 threads sharing a client"),
    ("enqueue.bulk", "enqueue, submit_many() of 1,000"),
    ("raw.insert", "raw insert ceiling, batches of 1,000"),
    ("raw.insert_statements", "  rqlite: 1,000 INSERTs per request"),
    ("raw.insert_multirow", "  rqlite: one 1,000-row INSERT"),
    ("raw.insert_jobs_table", "raw insert into taskq's jobs table"),
    ("raw.commits", "raw one-row commits"),
    ("raw.commits_jobs_table", "  one-job commits into taskq's jobs table"),
    ("raw.commit_idle.p50", "  one-row commit 20 ms after the last"),
    ("raw.pickup_floor.p50", "  pickup with plain sqlite3, p50"),
    ("ratio.bulk_vs_raw", "bulk enqueue / raw insert"),
    ("ratio.bulk_vs_jobs_table", "bulk enqueue / raw jobs-table insert"),
    ("start.first_result", "first result after launch, 2 workers"),
    ("raw.first_result_floor", "  the same with bare Python workers"),
    ("ratio.first_result_vs_floor", "  first result / its floor"),
    ("start.cpu", "  CPU of the 2 workers' start"),
    ("drain.broker_only", "drain, broker only (no worker)"),
    ("drain.pool", "drain, pool (first claim -> last)"),
    ("drain.pool_from_start", "drain, pool (from workers' start)"),
    ("drain.pool_pinned", "drain, pool, workers pinned"),
    ("drain.pool_unpinned", "drain, pool, workers not pinned"),
    ("ratio.drain_vs_raw", "pool drain / raw insert"),
    ("ratio.drain_vs_broker_only", "pool drain / broker-only drain"),
    ("drain.process", "drain, process (first claim -> last)"),
    ("drain.process_from_start", "drain, process (from workers' start)"),
    ("steady.pool", "steady state, pool, completed"),
    ("steady.pool.latency_p50", "  created -> finished p50"),
    ("steady.pool.latency_p99", "  created -> finished p99"),
    ("pickup.pool.p50", "pickup, pool, p50"),
    ("pickup.pool.p99", "pickup, pool, p99"),
    ("pickup.process.p50", "pickup, process, p50"),
    ("pickup.process.p99", "pickup, process, p99"),
    ("ratio.single_vs_commits", "one submit() / raw one-row commits"),
    ("ratio.single_vs_jobs_table_commits", "one submit() / one-job commits, jobs table"),
    ("ratio.single_vs_write", "one submit() / its store write alone"),
    ("ratio.pickup_vs_floor", "pickup p50 / two idle one-row commits"),
    ("idle.writes", "writes while 2 workers idle"),
    ("claim.p50@1000", "claim of 8, p50, 1,000 queued"),
    ("claim.p50@large", "claim of 8, p50, large backlog"),
    ("claim.ratio", "claim p50 large / 1,000"),
    ("claim.fill", "fill of the large backlog"),
    ("http.submit.client_single", "Client.submit beside taskq serve"),
    ("http.submit.http_single", "POST /jobs, one connection"),
    ("http.ratio.http_vs_client_single", "  POST /jobs / Client.submit"),
    ("http.ratio.http_bare_vs_client_single", "  the same from http.client"),
    ("http.request.floor_ms", "  GET /healthz p50 (httpx)"),
    ("http.request.floor_bare_ms", "  GET /healthz p50 (http.client)"),
    ("http.server.cpu_per_post_us", "  server CPU per POST /jobs"),
    ("http.request.floor_socket_ms", "  loopback TCP round trip p50"),
    ("http.ratio.http_reachable", "  POST /jobs / Client.submit within reach"),
    ("sandbox.pool", "sandbox, pool, per job"),
    ("sandbox.pool_recycled", "sandbox, pool recycled /200, per job"),
    ("sandbox.process", "sandbox, process, per job"),
]


def _format(result: Result | None) -> str:
    if result is None or result.value is None or math.isnan(result.value):
        return "-"
    value = result.value
    if result.unit == "ratio":
        return f"{value:.2f}x" if value >= 0.1 else f"{value:.4f}x"
    if result.unit == "ms":
        return f"{value:.1f} ms" if value < 100 else f"{value:,.0f} ms"
    if result.unit == "writes/s":
        return f"{value:.1f}/s"
    if result.unit == "us":
        return f"{value:,.0f} us"
    if result.unit == "pages":
        return f"{value:.2f} pages"
    return f"{value:,.0f}/s"


def table(results: list[Result], stores: list[str]) -> str:
    found = {(result.store, result.key): result for result in results}
    width = max(len(label) for _, label in ROWS) + 2
    header = f"{'':<{width}}" + "".join(f"{store:>14}" for store in stores)
    header += "   " + "  ".join(f"target {store}" for store in stores)
    lines = [header, "-" * len(header)]
    for key, label in ROWS:
        cells = [found.get((store, key)) or found.get(("-", key)) for store in stores]
        if all(cell is None for cell in cells):
            continue
        if key.startswith("sandbox."):
            cells = [found.get(("-", key))] + [None] * (len(stores) - 1)
        line = f"{label:<{width}}" + "".join(f"{_format(cell):>14}" for cell in cells)
        targets = [TARGETS.get((key, store), "") for store in stores]
        if any(targets):
            line += "   " + "  ".join(
                f"{target:<{len('target ') + len(store)}}"
                for target, store in zip(targets, stores, strict=True)
            )
        lines.append(line)
    return "\n".join(lines)


def notes(results: list[Result]) -> str:
    lines = []
    for result in results:
        if result.note:
            lines.append(f"[{result.store}] {result.key}: {result.note}")
    return "\n".join(lines)


def claims_table(details: dict[str, Any]) -> str:
    lines = []
    for store, info in details.items():
        claims = info.get("claims")
        if not claims:
            continue
        lines.append(
            f"[{store}] {'backlog':>10}  {'operation':<24} "
            f"{'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        )
        for latency in claims["latencies"]:
            lines.append(
                f"[{store}] {latency['backlog']:>10,}  {latency['operation']:<24} "
                f"{latency['p50_ms']:>8.2f} {latency['p99_ms']:>8.2f} {latency['max_ms']:>8.2f}"
            )
        for fill in claims["fills"]:
            lines.append(
                f"[{store}] fill: {fill['jobs']:,} jobs in {fill['seconds']:.1f} s = "
                f"{fill['jobs_per_second']:,} jobs/s ({fill['batch']:,} per request)"
            )
    return "\n".join(lines)


# -- profile mode ------------------------------------------------------------------------------


def profile(name: str, directory: Path, root: Path, jobs: int, concurrency: int) -> None:
    """Drain ``jobs`` with the first worker under cProfile; print its top functions and threads."""
    directory.mkdir(parents=True, exist_ok=True)
    output = directory / f"worker-{name}.prof"
    with open_bench_store(name, root / name) as store:
        client = Client(store.url)
        try:
            first_id = enqueue_echo(client, "bench-pool", 0, jobs)
            say(f"[{name}] profiling a drain of {jobs:,} jobs, first worker under cProfile")
            with draining_workers(
                store,
                client,
                root / f"{name}-profile",
                queue="bench-pool",
                first_id=first_id,
                jobs=jobs,
                concurrency=concurrency,
                isolation="pool",
                profile_to=output,
            ) as (fleet, drained):
                threads = []
                for pid in fleet.pids:
                    total = process_cpu(pid)
                    main = main_thread_cpu(pid)
                    tids = os.listdir(f"/proc/{pid}/task")
                    threads.append(
                        f"worker pid {pid}: {total:.2f} CPU s, main thread {main:.2f}, "
                        f"{len(tids) - 1} other threads now {total - main:.2f}"
                    )
        finally:
            client.close()
    print(f"[{name}] drain of {jobs:,} jobs: {drained.rate:,.0f} jobs/s (first worker profiled)")
    print(cpu_note(drained.cpu, drained.spawn_to_last))
    print("\n".join(threads))
    text_path = directory / f"worker-{name}.txt"
    with text_path.open("w") as out:
        for order in ("tottime", "cumulative"):
            stats = pstats.Stats(str(output), stream=out)
            stats.sort_stats(order).print_stats(40)
    stats = pstats.Stats(str(output))
    stats.sort_stats("tottime").print_stats(25)
    print(f"profile: {output} (pstats), {text_path} (top 40 by tottime and cumulative)")


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a sanity run with small numbers")
    parser.add_argument("--stores", default="sqlite,rqlite", help="comma-separated: sqlite,rqlite")
    parser.add_argument(
        "--concurrency",
        type=int,
        help=(
            f"slots per worker for every store ({WORKERS} workers; default "
            + ", ".join(f"{name} {slots}" for name, slots in DEFAULT_CONCURRENCY.items())
            + ")"
        ),
    )
    parser.add_argument(
        "--pinned",
        action="store_true",
        help="pin worker i with --cpus i throughout (default: the scheduler places them)",
    )
    parser.add_argument(
        "--steady-rate",
        type=float,
        help="jobs/s the client offers in the steady state (default: 4,000 SQLite, 1,000 rqlite)",
    )
    parser.add_argument(
        "--rqlite-claim-backlog",
        type=int,
        help="the large backlog for rqlite's claim latency (default 100,000; quick 5,000)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=Path("bench-results.json"),
        help="where to write the results (default: bench-results.json)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="profile one worker through a drain instead (cProfile output into DIR)",
    )
    args = parser.parse_args(argv)
    stores = [name.strip() for name in args.stores.split(",") if name.strip()]
    if not stores or any(name not in ("sqlite", "rqlite") for name in stores):
        parser.error("--stores takes sqlite, rqlite or both")
    sizes = Sizes(args.quick)
    end_to_end.PINNED = args.pinned
    slots = {name: args.concurrency or DEFAULT_CONCURRENCY[name] for name in stores}
    if args.rqlite_claim_backlog:
        sizes.claims["rqlite"] = [1_000, args.rqlite_claim_backlog]
    facts = machine_facts()
    cores = facts["cores"] or 1
    load = facts["load_average_before"][0]
    print(
        f"machine: {cores} cores ({facts['cpu']}), {facts['memory']}, Linux {facts['kernel']}, "
        f"Python {facts['python']}; load average before: "
        + " ".join(map(str, facts["load_average_before"]))
    )
    if load > 0.5 * cores:
        print(
            f"warning: the machine is busy (load {load:.2f}): numbers will be low", file=sys.stderr
        )
    with tempfile.TemporaryDirectory(prefix="taskq-bench-") as directory:
        root = Path(directory)
        if args.profile is not None:
            for name in stores:
                profile(name, args.profile, root, sizes.backlog, slots[name])
            return 0
        started = time.monotonic()
        host_before = host_cpu.read()
        results: list[Result] = []
        say(
            f"sandbox overhead: {sizes.sandbox_pool:,} pool jobs, "
            f"{sizes.sandbox_process} process jobs"
        )
        overhead = sandbox_overhead(sizes.sandbox_pool, sizes.sandbox_process)
        for mode, numbers in overhead.items():
            results.append(
                Result(
                    "-",
                    f"sandbox.{mode}",
                    numbers["ms_per_job"],
                    "ms",
                    f"{numbers['jobs']:,} no-op jobs one after another, "
                    f"p50 {numbers['p50_ms']:.2f} "
                    f"max {numbers['max_ms']:.1f} ms",
                    numbers,
                )
            )
        details: dict[str, Any] = {}
        for name in stores:
            found, details[name] = bench_store(name, root, sizes, slots[name], args.steady_rate)
            results += found
        elapsed = time.monotonic() - started
        host = host_cpu.shares(host_before, host_cpu.read())
    facts["load_average_after"] = [round(value, 2) for value in os.getloadavg()]
    facts["host_cpu_over_the_run"] = {kind: round(share, 3) for kind, share in host.items()}
    print()
    print(table(results, stores))
    print()
    print(notes(results))
    print()
    print(claims_table(details))
    print()
    print(
        f"{WORKERS} workers x "
        + ", ".join(f"{count} slots ({name})" for name, count in slots.items())
        + ("; worker i pinned with --cpus i" if args.pinned else "; not pinned")
        + "; otherwise default worker settings "
        f"(heartbeat {WorkerSettings().heartbeat_seconds:g} s, pool child recycled after "
        f"{WorkerSettings().pool_recycle_after} jobs); "
        f"{'quick' if args.quick else 'full'} run in {elapsed:.0f} s; load average after: "
        f"{' '.join(map(str, facts['load_average_after']))}" + _host_said(host)
    )
    summary = {
        "quick": args.quick,
        "machine": facts,
        "settings": {
            "workers": WORKERS,
            "pinned": end_to_end.PINNED,
            "concurrency": slots,
            "bulk_batch": BULK_BATCH,
            "sizes": vars(sizes),
            "steady_rate": {name: args.steady_rate or STEADY_RATE[name] for name in stores},
        },
        "stores": {name: {"version": info.get("version")} for name, info in details.items()},
        "results": [asdict(result) for result in results],
        "claims": {name: info.get("claims") for name, info in details.items()},
        "targets": {f"{key}@{store}": target for (key, store), target in TARGETS.items()},
        "seconds": round(elapsed, 1),
    }
    args.json.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
