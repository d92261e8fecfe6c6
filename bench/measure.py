"""One store's measurements, in the order the bench takes them (see :mod:`bench.main`).

:func:`bench_store` opens a fresh store of one kind and runs each phase on
it: the raw ceiling, enqueue, the broker alone, the first result after the
workers' launch, the pool drain with pickup, idle writes and the steady
state, the drain pinned (or not), process isolation, and last the claim
latency at large backlogs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

from bench import claim_latency, end_to_end, first_result_floor, pickup_floor, submit_parts
from bench import http as http_submits
from bench.common import (
    Result,
    cpu_breakdown,
    cpu_note,
    percentile,
    say,
)
from bench.disk import STALL_SECONDS, disk_probe
from bench.end_to_end import (
    ECHO,
    WORKERS,
    Drain,
    broker_only_drain,
    draining_workers,
    enqueue_echo,
    idle_writes,
    pickup,
    steady,
)
from bench.first_result import first_result_after_launch, start_cpu
from bench.host_cpu import HostWindow
from bench.stores import BenchStore, open_bench_store, payload_text
from taskq.broker.client.client import Client, call_spec
from taskq.worker.settings import WorkerSettings

BULK_BATCH = 1_000
SUBMIT_THREADS = 8  # concurrent submitters sharing one client (group commit)
WAL_SAMPLE_SUBMITS = 100  # fewer pages than the store's autocheckpoint at 1,000
# Slots per worker, by store. A write costs about the same whatever its size
# (on rqlite several milliseconds of CPU across the cluster, on SQLite an
# fsync that holds the write lock), so fuller acknowledgement batches pay, up
# to where more sandbox children cost more CPU than the fewer writes save.
# The workers run with their default prefetch (four times the slots), which
# fills the batches beyond the slots with jobs this short, so the slots only
# need to keep the CPUs busy. On 2 cores that is 4 slots for SQLite (8% faster
# than 8 in paired runs, whose 16 children used half as much CPU again per
# job) and 16 for rqlite, whose writes cost more (1,564 jobs/s against 1,411
# with 8 slots).
DEFAULT_CONCURRENCY = {"sqlite": 4, "rqlite": 16}

# Jobs a second the steady-state client offers, unless --steady-rate says otherwise.
STEADY_RATE = {"sqlite": 4_000.0, "rqlite": 1_000.0}


class Sizes:
    """How much of everything: the full run, or ``--quick``."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.single = {"sqlite": 300, "rqlite": 100} if quick else {"sqlite": 2_000, "rqlite": 500}
        self.backlog = 2_000 if quick else 20_000
        self.broker_only = (
            {"sqlite": 2_000, "rqlite": 500} if quick else {"sqlite": 20_000, "rqlite": 5_000}
        )
        self.raw_commits = (
            {"sqlite": 200, "rqlite": 100} if quick else {"sqlite": 1_000, "rqlite": 300}
        )
        self.process_backlog = 20 if quick else 500
        self.pickup = 50 if quick else 200
        self.pickup_spacing = 0.020
        self.process_pickup = 10 if quick else 50
        self.process_pickup_spacing = 0.100
        self.idle_seconds = 1.5 if quick else 10.0
        self.steady_seconds = 1.5 if quick else 10.0
        self.claims = {
            "sqlite": [1_000, 20_000] if quick else [1_000, 1_000_000],
            "rqlite": [1_000, 5_000] if quick else [1_000, 100_000],
        }
        self.first_result_launches = 3 if quick else 5
        self.http_jobs = 300 if quick else 1_000
        self.sandbox_pool = 200 if quick else 2_000
        self.sandbox_process = 10 if quick else 100


# -- one store ------------------------------------------------------------------------------


def bench_store(
    name: str, root: Path, sizes: Sizes, concurrency: int, steady_rate: float | None
) -> tuple[list[Result], dict[str, Any]]:
    results: list[Result] = []
    details: dict[str, Any] = {}

    host = HostWindow()

    def add(key: str, value: float | None, unit: str, note: str = "", **extra: Any) -> Result:
        # A ratio is worked out from figures measured before, each with its own shares.
        shares = {} if unit == "ratio" else host.shares_of_last_measure()
        result = Result(name, key, value, unit, note, {**extra, **shares})
        results.append(result)
        return result

    with open_bench_store(name, root / name) as store:
        say(f"[{name}] {store.label} at {store.url}")
        details["version"] = store.version()
        client = Client(store.url)
        try:
            _raw(store, sizes, add)
            if name == "sqlite":
                _pickup_floor(root / "pickup-floor", sizes, add)
            single = _enqueue_single(store, client, sizes, add)
            _enqueue_concurrent(client, name, sizes, single, add)
            first_id, bulk = _enqueue_bulk(client, sizes, add)
            raw = next(r for r in results if r.key == "raw.insert").value or math.nan
            add("ratio.bulk_vs_raw", bulk / raw, "ratio", "broker bulk enqueue / raw insert")
            schema = next(r for r in results if r.key == "raw.insert_jobs_table").value
            add(
                "ratio.bulk_vs_jobs_table",
                bulk / (schema or math.nan),
                "ratio",
                "broker bulk enqueue / raw insert into taskq's jobs table",
            )
            _broker_only(client, name, sizes, concurrency, add)
            _first_result(store, client, root, sizes, add)
            _pool_phase(store, client, root, name, sizes, concurrency, steady_rate, first_id, add)
            drained = next(r for r in results if r.key == "drain.pool").value or math.nan
            add("ratio.drain_vs_raw", drained / raw, "ratio", "pool drain / raw insert")
            alone = next(r for r in results if r.key == "drain.broker_only").value or math.nan
            add(
                "ratio.drain_vs_broker_only",
                drained / alone,
                "ratio",
                "pool drain / the same reports and claims sent by one process with no worker",
            )
            _against_floors(results, add)
            _pinning_drain(store, client, root, sizes, concurrency, add)
            _process_phase(store, client, root, sizes, concurrency, add)
        finally:
            client.close()
        # Claims last: the huge backlog must not slow the other measurements.
        details["claims"] = _claims(store, root, name, sizes, add)
    # On a fresh store of its own, with this one stopped.
    results += _over_http(name, root / f"{name}-http", sizes, host)
    return results, details


def _over_http(name: str, root: Path, sizes: Sizes, host: HostWindow) -> list[Result]:
    """``POST /jobs`` beside ``Client.submit`` through one ``taskq serve`` (``bench.http``)."""
    say(f"over HTTP: {sizes.http_jobs:,} jobs each way through taskq serve")
    root.mkdir(parents=True, exist_ok=True)
    host.shares_of_last_measure()  # what came before is not the server's
    found = http_submits.measure(name, root, sizes.http_jobs, batch=500, connections=8)
    # The whole of bench.http is one window: its figures come back together.
    shares = host.shares_of_last_measure()
    return [
        replace(result, key=f"http.{result.key}", extra={**result.extra, **shares})
        for result in found
    ]


def _against_floors(results: list[Result], add: Callable[..., Result]) -> None:
    """Single submits and pickups beside the bare commits under them (issue 44's goals)."""
    found = {result.key: result.value for result in results}

    def value(key: str) -> float:
        figure = found.get(key)
        return math.nan if figure is None else figure

    add(
        "ratio.single_vs_commits",
        value("enqueue.single") / value("raw.commits"),
        "ratio",
        "one submit() per job / one-row commits back to back, from one loop",
    )
    if "raw.commits_jobs_table" in found:
        add(
            "ratio.single_vs_jobs_table_commits",
            value("enqueue.single") / value("raw.commits_jobs_table"),
            "ratio",
            "one submit() per job / one-job commits into taskq's own jobs table: the broker's "
            "share of a single submit, the schema's left out",
        )
    add(
        "ratio.pickup_vs_floor",
        value("pickup.pool.p50") / (2 * value("raw.commit_idle.p50")),
        "ratio",
        "pickup p50 / two one-row commits 20 ms apart (the submit's and the claim's)",
    )


def _pickup_floor(directory: Path, sizes: Sizes, add: Callable[..., Result]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    say(f"pickup floor: {sizes.pickup} one-row submits, plain sqlite3, three processes")
    figures = pickup_floor.summary(
        pickup_floor.pickup_floor(directory, sizes.pickup, sizes.pickup_spacing)
    )
    add(
        "raw.pickup_floor.p50",
        figures["p50_ms"],
        "ms",
        f"plain sqlite3: a submitter's commit, an inotify-woken worker's claim, a pipe to "
        f"a runner process, {sizes.pickup_spacing * 1000:.0f} ms apart "
        f"(p99 {figures['p99_ms']:.2f} ms; bench/pickup_floor.py)",
    )


def _raw(store: BenchStore, sizes: Sizes, add: Callable[..., Result]) -> None:
    rows = [("bench-raw", payload_text(number)) for number in range(sizes.backlog)]
    say(f"raw insert of {len(rows):,} rows in batches of {BULK_BATCH:,}")
    best = len(rows) / store.raw_insert(rows, BULK_BATCH)
    note = f"{len(rows):,} rows, executemany, one transaction per {BULK_BATCH:,}"
    if store.name == "rqlite":
        add(
            "raw.insert_statements",
            best,
            "rows/s",
            f"{len(rows):,} rows, {BULK_BATCH:,} INSERT statements per /db/execute",
        )
        multirow = len(rows) / store.raw_insert_multirow(rows, BULK_BATCH)
        add(
            "raw.insert_multirow",
            multirow,
            "rows/s",
            f"{len(rows):,} rows, one INSERT ... VALUES (?,?) x{BULK_BATCH:,} per /db/execute",
        )
        best = max(best, multirow)
        note = "the better of the two forms below"
    add("raw.insert", best, "rows/s", note)
    schema = len(rows) / store.raw_insert_jobs_table(rows, BULK_BATCH)
    add(
        "raw.insert_jobs_table",
        schema,
        "rows/s",
        f"{len(rows):,} rows straight into taskq's jobs table (its 7 indexes, UNIQUE "
        "idempotency key, count trigger), batches of 1,000, no broker logic",
    )
    count = sizes.raw_commits[store.name]
    say(f"raw commits: {count} one-row transactions")
    add(
        "raw.commits",
        count / sum(store.raw_commits(count)),
        "commits/s",
        f"{count} one-row commits",
    )
    if store.name == "sqlite":
        say(f"raw commits into taskq's jobs table: {count} one-job transactions")
        add(
            "raw.commits_jobs_table",
            count / sum(store.raw_commits_jobs_table(count)),
            "commits/s",
            f"{count} one-job commits straight into taskq's jobs table (its 7 indexes, UNIQUE "
            "idempotency key, count trigger), one INSERT each, no broker logic",
        )
    idle = sizes.pickup
    spacing_ms = sizes.pickup_spacing * 1000
    say(f"raw commits after idle: {idle} one-row transactions {spacing_ms:.0f} ms apart")
    took = store.raw_commits(idle, gap=sizes.pickup_spacing)
    add(
        "raw.commit_idle.p50",
        1000 * percentile(took, 0.5),
        "ms",
        f"{idle} one-row commits {spacing_ms:.0f} ms apart, as pickup's "
        f"submits come (p99 {1000 * percentile(took, 0.99):.2f} ms): a pickup holds two, "
        "the submit's and the claim's",
    )


def _enqueue_single(
    store: BenchStore, client: Client, sizes: Sizes, add: Callable[..., Result]
) -> float:
    count = sizes.single[store.name]
    say(f"enqueue: {count:,} jobs, one submit() each")
    timings = []
    started, cpu_started = time.perf_counter(), time.process_time()
    for number in range(count):
        tick = time.perf_counter()
        client.submit(ECHO, number, queue="bench-single", unchecked=True)
        timings.append(time.perf_counter() - tick)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    timings.sort()
    add(
        "enqueue.single",
        count / seconds,
        "jobs/s",
        f"{count:,} jobs; a submit() takes p50 {1000 * timings[len(timings) // 2]:.2f} ms",
    )
    add(
        "enqueue.single.cpu",
        1e6 * cpu_seconds / count,
        "us",
        "CPU of the submitting process per submit() (SQLite's work and the kernel's included "
        "on the embedded store; not the nodes' on rqlite)",
    )
    if store.name == "sqlite":
        # On rqlite the Raft round is the whole submit: its write alone moves with the cluster.
        say(f"enqueue: {count:,} submits and as many writes alone, in blocks in turn")
        submits, writes = submit_parts.in_turn(client, ECHO, "bench-single", count)
        pairs = sorted(write / submit for submit, write in zip(submits, writes, strict=True))
        ran = len(writes) * max(1, count // len(writes))  # each way, as in_turn runs them
        add(
            "enqueue.single_write",
            ran / sum(writes),
            "jobs/s",
            f"{ran:,} one-job writes through the client's store (the clock's tick, the rate "
            "spend, the INSERT), the job checked and built once before each block "
            f"(bench/submit_parts.py); submit() beside them: {ran / sum(submits):,.0f}/s",
        )
        add(
            "ratio.single_vs_write",
            percentile(pairs, 0.5),
            "ratio",
            f"one submit() per job / its store write alone, the median of {len(pairs)} blocks "
            f"of each in turn ({pairs[0]:.2f}-{pairs[-1]:.2f}x): the share of a submit's time "
            "that is its write; the rest is the client's Python, most of it checking and "
            "building the job",
        )
        # What each submit writes, which load does not change: Huey on SQLite writes 2 pages.
        with store.count_wal_pages() as counted:
            for number in range(WAL_SAMPLE_SUBMITS):
                client.submit(ECHO, number, queue="bench-single", unchecked=True)
        add(
            "enqueue.single.wal_pages",
            counted["pages"] / WAL_SAMPLE_SUBMITS,
            "pages",
            f"WAL pages committed per submit(), over {WAL_SAMPLE_SUBMITS} more of them",
        )
    return count / seconds


def _enqueue_concurrent(
    client: Client, name: str, sizes: Sizes, single: float, add: Callable[..., Result]
) -> None:
    """Single submits from several threads sharing the client: their writes are shared."""
    each = sizes.single[name] // SUBMIT_THREADS
    say(f"enqueue: {SUBMIT_THREADS} threads sharing a client, {each:,} submit() each")

    def submit_in_turn(thread: int) -> None:
        for number in range(each):
            client.submit(ECHO, [thread, number], queue="bench-single", unchecked=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(SUBMIT_THREADS) as threads:
        list(threads.map(submit_in_turn, range(SUBMIT_THREADS)))
    rate = each * SUBMIT_THREADS / (time.perf_counter() - started)
    add(
        "enqueue.threads",
        rate,
        "jobs/s",
        f"{SUBMIT_THREADS} threads sharing one Client, {each:,} submit() each: "
        f"{rate / single:.1f}x one thread",
    )


def _enqueue_bulk(client: Client, sizes: Sizes, add: Callable[..., Result]) -> tuple[int, float]:
    count = sizes.backlog
    say(f"enqueue: {count:,} jobs, submit_many() of {BULK_BATCH:,}")
    batches = [
        [
            call_spec(ECHO, [n], queue="bench-pool")
            for n in range(first, min(first + BULK_BATCH, count))
        ]
        for first in range(0, count, BULK_BATCH)
    ]
    ids: list[int] = []
    started = time.perf_counter()
    for specs in batches:
        ids += [handle.id for handle in client.submit_many(specs)]
    rate = count / (time.perf_counter() - started)
    add("enqueue.bulk", rate, "jobs/s", f"{count:,} jobs, {BULK_BATCH:,} per request")
    return ids[0], rate


def _broker_only(
    client: Client, name: str, sizes: Sizes, concurrency: int, add: Callable[..., Result]
) -> None:
    jobs = sizes.broker_only[name]
    # As many as a worker's request can carry: its slots and its default prefetch.
    batch = concurrency + WorkerSettings(concurrency=concurrency).most_prefetch
    say(f"drain, broker only: {jobs:,} jobs, report and claim {batch} per request")
    found = broker_only_drain(client, "bench-broker-only", jobs=jobs, batch=batch)
    add(
        "drain.broker_only",
        found["jobs_per_second"],
        "jobs/s",
        f"{jobs:,} jobs, no worker: one process sends job_report_and_claim of "
        f"{batch} jobs, one request at a time, {found['ms_per_request']:.2f} ms each",
        **found,
    )


def _first_result(
    store: BenchStore, client: Client, root: Path, sizes: Sizes, add: Callable[..., Result]
) -> None:
    """The first result after launch, its start's CPU, and on SQLite its floor: launches of
    bare workers in taskq's shape, taken in turn with taskq's."""
    launches = sizes.first_result_launches
    floor = store.name == "sqlite"
    say(
        f"first result after launch: {launches} launches of {WORKERS} default workers"
        + (f", each followed by one of {WORKERS} bare workers (the floor)" if floor else "")
    )
    directory = root / f"{store.name}-first-result"
    beside = partial(first_result_floor.launch_once, root / "first-result-floor")
    found = first_result_after_launch(
        store, client, directory, launches=launches, beside=beside if floor else None
    )
    started = start_cpu(store, directory, launches=launches)
    add(
        "start.cpu",
        started["p50_ms"],
        "ms",
        f"median of {launches} launches of {WORKERS} taskq-worker with default settings onto "
        f"an empty queue: CPU of the workers and every process under them once all started "
        f"(min {started['min_ms']:.0f}, max {started['max_ms']:.0f} ms; the pool children "
        f"{started['children_p50_ms']:.0f} ms)",
        **started,
    )
    add(
        "start.first_result",
        found["p50_ms"],
        "ms",
        f"median of {launches} launches of {WORKERS} taskq-worker with default settings onto "
        f"{found['backlog']} queued echo jobs, polled every 10 ms: min {found['min_ms']:.0f} "
        f"max {found['max_ms']:.0f} ms (the workers' start-up, as the peers' harness sees it; "
        f"the first job itself ended at {found['ended_p50_ms']:.0f} ms)",
        **found,
    )
    if floor:
        add(
            "raw.first_result_floor",
            found["beside_p50_ms"],
            "ms",
            f"median of {launches} launches of {WORKERS} bare Python workers in taskq's shape, "
            "each right after one of taskq's: each imports msgspec, asyncio and sqlite3, starts "
            "a fresh interpreter that imports msgspec, claims a row and commits its result, "
            "seen by a poll every 10 ms (bench/first_result_floor.py): "
            f"min {min(found['beside_ms']):.0f} max {max(found['beside_ms']):.0f} ms",
            ms=found["beside_ms"],
        )
        add(
            "ratio.first_result_vs_floor",
            found["ratio_p50"],
            "ratio",
            "first result after launch / the same shape with bare Python: the median of each "
            "launch's ratio to the floor's launched right after it",
        )


def _drain_results(
    drain: Drain, key: str, add: Callable[..., Result], what: str, *, exact_writes: bool
) -> None:
    if drain.succeeded != drain.jobs or drain.wrong_results:
        raise RuntimeError(
            f"{what}: {drain.succeeded} of {drain.jobs} succeeded, "
            f"{drain.wrong_results} wrong results"
        )
    wall = drain.spawn_to_last
    add(
        key,
        drain.rate,
        "jobs/s",
        f"{what}; first claim {drain.spawn_to_first:.2f} s after the workers started; "
        f"jobs per worker {sorted(drain.per_worker.values())}; "
        f"{drain.writes:,} write transactions ({drain.jobs / max(drain.writes, 1):.1f} jobs per "
        f"write{'' if exact_writes else '; SQLite: claiming transactions, from lease tokens'}); "
        + cpu_note(drain.cpu, wall),
        first_to_last_seconds=round(drain.first_to_last, 3),
        spawn_to_first_seconds=round(drain.spawn_to_first, 3),
        per_worker=drain.per_worker,
        writes=drain.writes,
        cpu=cpu_breakdown(drain.cpu, wall),
    )
    add(f"{key}_from_start", drain.rate_from_spawn, "jobs/s", "from the workers' start")


def _pool_phase(
    store: BenchStore,
    client: Client,
    root: Path,
    name: str,
    sizes: Sizes,
    concurrency: int,
    steady_rate: float | None,
    first_id: int,
    add: Callable[..., Result],
) -> None:
    say(f"drain: {sizes.backlog:,} jobs, {WORKERS} workers x {concurrency} slots, pool isolation")
    with draining_workers(
        store,
        client,
        root / f"{name}-pool",
        queue="bench-pool",
        first_id=first_id,
        jobs=sizes.backlog,
        concurrency=concurrency,
        isolation="pool",
    ) as (fleet, drained):
        _drain_results(
            drained,
            "drain.pool",
            add,
            f"{sizes.backlog:,} jobs, {WORKERS} workers x {concurrency} slots",
            exact_writes=store.name == "rqlite",
        )
        say(f"idle: counting writes for {sizes.idle_seconds:g} s")
        idle = idle_writes(store, fleet, sizes.idle_seconds)
        add(
            "idle.writes",
            idle["writes_per_second"],
            "writes/s",
            f"{idle['writes']} writes in {idle['seconds']:g} s with {WORKERS} idle workers; "
            f"their heartbeats alone would be {idle['heartbeats_per_second']:.1f}/s; idle CPU: "
            f"workers {100 * idle['cpu_seconds_workers'] / idle['seconds']:.0f}% of a core"
            + (
                f", rqlited {100 * idle['cpu_seconds_store_server'] / idle['seconds']:.0f}%"
                if store.name == "rqlite"
                else ""
            ),
            **idle,
        )
        say(f"pickup: {sizes.pickup} jobs, {sizes.pickup_spacing * 1000:g} ms apart")
        # The workers have just been idle for the whole idle window.
        with disk_probe(store.directory) as disk:
            picked = pickup(
                client,
                "bench-pool",
                jobs=sizes.pickup,
                spacing=sizes.pickup_spacing,
                idle_first=0.5,
                disk=disk,
            )
        _pickup_results(picked, "pickup.pool", add)
        rate = steady_rate or STEADY_RATE[name]
        say(f"steady state: submitting {rate:,.0f} jobs/s for {sizes.steady_seconds:g} s")
        held = steady(client, fleet, "bench-pool", rate=rate, seconds=sizes.steady_seconds)
        add(
            "steady.pool",
            held["completed_per_second"],
            "jobs/s",
            f"offered {rate:,.0f}/s for {held['seconds']:.1f} s: submitted "
            f"{held['submitted_per_second']:,.0f}/s in {held['submit_requests']} requests; "
            f"{held['left_queued_and_cancelled']:,} left queued at the end"
            + (
                " (kept up); "
                if held["left_queued_and_cancelled"] < rate / 2
                else " (could not keep up: the backlog grew, so latency is queueing); "
            )
            + cpu_note(held["cpu"], held["window"]),
            **{key: value for key, value in held.items() if key not in ("cpu", "window")},
            cpu=cpu_breakdown(held["cpu"], held["window"]),
        )
        add(
            "steady.pool.latency_p50",
            held["latency_p50_ms"],
            "ms",
            "created -> finished, jobs finished in the window",
        )
        add("steady.pool.latency_p99", held["latency_p99_ms"], "ms")


def _pickup_results(picked: dict[str, Any], key: str, add: Callable[..., Result]) -> None:
    note = (
        f"{picked['succeeded']} of {picked['jobs']} jobs, {picked['spacing_ms']:g} ms apart; "
        f"min {picked['min_ms']:.1f} max {picked['max_ms']:.1f} ms; the submit call itself "
        f"p50 {picked['submit_call_p50_ms']:.1f} ms"
    )
    if "fsyncs" in picked:
        note += (
            f"; the disk meanwhile: a 4 KiB appending fsync p50 {picked['fsync_p50_ms']:.1f} "
            f"max {picked['fsync_max_ms']:.1f} ms, {picked['fsync_stalls']} of "
            f"{picked['fsyncs']} over {STALL_SECONDS * 1000:g} ms; "
            f"{picked['slow_pickups_during_stall']} of the {picked['slow_pickups']} pickups "
            "over 3x the median overlapped such a stall"
        )
    add(f"{key}.p50", picked["p50_ms"], "ms", note, **picked)
    add(f"{key}.p99", picked["p99_ms"], "ms")


def _pinning_drain(
    store: BenchStore,
    client: Client,
    root: Path,
    sizes: Sizes,
    concurrency: int,
    add: Callable[..., Result],
) -> None:
    """The pool drain again with the workers pinned to CPUs, or not, whichever it was not."""
    pinned = not end_to_end.PINNED
    name = "pinned" if pinned else "unpinned"
    how = "pinned to a CPU each (--cpus i)" if pinned else "not pinned"
    first_id = enqueue_echo(client, f"bench-{name}", 0, sizes.backlog)
    say(f"drain: {sizes.backlog:,} jobs, {WORKERS} workers x {concurrency} slots, {name}")
    with draining_workers(
        store,
        client,
        root / f"{store.name}-{name}",
        queue=f"bench-{name}",
        first_id=first_id,
        jobs=sizes.backlog,
        concurrency=concurrency,
        isolation="pool",
        pinned=pinned,
    ) as (_, drained):
        pass
    _drain_results(
        drained,
        f"drain.pool_{name}",
        add,
        f"as drain.pool, but with the workers {how}: "
        f"{sizes.backlog:,} jobs, {WORKERS} workers x {concurrency} slots",
        exact_writes=store.name == "rqlite",
    )


def _process_phase(
    store: BenchStore,
    client: Client,
    root: Path,
    sizes: Sizes,
    concurrency: int,
    add: Callable[..., Result],
) -> None:
    count = sizes.process_backlog
    first_id = enqueue_echo(client, "bench-process", 0, count)
    say(f"drain: {count:,} jobs, {WORKERS} workers x {concurrency} slots, process isolation")
    with draining_workers(
        store,
        client,
        root / f"{store.name}-process",
        queue="bench-process",
        first_id=first_id,
        jobs=count,
        concurrency=concurrency,
        isolation="process",
    ) as (_, drained):
        _drain_results(
            drained,
            "drain.process",
            add,
            f"{count:,} jobs (a fresh interpreter per job), "
            f"{WORKERS} workers x {concurrency} slots",
            exact_writes=store.name == "rqlite",
        )
        say(
            f"pickup: {sizes.process_pickup} jobs, {sizes.process_pickup_spacing * 1000:g} ms "
            "apart, process isolation"
        )
        picked = pickup(
            client,
            "bench-process",
            jobs=sizes.process_pickup,
            spacing=sizes.process_pickup_spacing,
        )
        _pickup_results(picked, "pickup.process", add)


def _claims(
    store: BenchStore, root: Path, name: str, sizes: Sizes, add: Callable[..., Result]
) -> dict[str, Any]:
    backlogs = sizes.claims[name]
    say(f"claim latency at {', '.join(f'{size:,}' for size in backlogs)} queued jobs")
    if name == "sqlite":
        # A file of its own for each backlog, measured side by side.
        directory = root / "sqlite-claims"
        directory.mkdir(parents=True, exist_ok=True)
        urls = {size: f"sqlite://{directory / f'backlog-{size}.db'}" for size in backlogs}
        latencies, fills = claim_latency.run_side_by_side(urls)
    else:
        # One cluster: its backlog grows from one size to the next.
        latencies, fills = claim_latency.run(backlogs, store.url)
    claims = [latency for latency in latencies if latency.operation.startswith("claim")]
    small, large = claims[0], claims[-1]
    add(f"claim.p50@{small.backlog}", small.p50_ms, "ms", f"claim of {claim_latency.CLAIM_LIMIT}")
    add("claim.p50@large", large.p50_ms, "ms", f"at {large.backlog:,} queued jobs")
    add(
        "claim.ratio",
        large.p50_ms / small.p50_ms,
        "ratio",
        f"p50 at {large.backlog:,} / at {small.backlog:,}",
    )
    fill = fills[-1]
    add(
        "claim.fill",
        fill.jobs_per_second,
        "jobs/s",
        f"filling {fill.jobs:,} jobs, {fill.batch:,} per request",
    )
    return {
        "latencies": [asdict(latency) for latency in latencies],
        "fills": [
            {**asdict(fill), "jobs_per_second": round(fill.jobs_per_second)} for fill in fills
        ],
    }
