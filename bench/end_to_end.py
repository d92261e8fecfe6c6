"""End to end through real ``taskq-worker`` processes: drain, idle writes, pickup, steady state.

Workers are started and stopped by pid through :class:`taskq.dev.workers.WorkerFleet`
(SIGTERM, a bounded wait, then SIGKILL of the worker and of every sandbox
child it was seen to have). They run with the default worker
settings (a config file with an empty ``[worker]`` section, so no user
config leaks in) plus ``--queues``, ``--concurrency`` and ``--isolation``,
and import the bench's jobs (:mod:`bench.jobs`) through ``PYTHONPATH``.

Times of the store (``started_at``, ``finished_at``, ``created_at``) and the
wall clock of this process are compared directly: every process runs on
this machine, and the rqlite leader's clock is this machine's too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    CpuSample,
    cpu_sample,
    finished_count,
    jobs_pythonpath,
    jobs_since,
    percentile,
    queue_counts,
    wait_until,
)
from bench.disk import DiskProbe
from bench.stores import BenchStore
from taskq.broker.client.client import Client, call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import ClaimRequest, job_claim
from taskq.broker.ops.jobs import job_cancel
from taskq.broker.ops.leases import Report, ReportKind, job_report_and_claim
from taskq.broker.records import AttemptReport, Fenced, JobState
from taskq.broker.stores.store import Statement, Store
from taskq.dev.workers import WorkerFleet, environment_without
from taskq.worker.settings import WorkerSettings

ECHO = "bench.jobs:echo"
STAMP = "bench.jobs:stamp"
WORKERS = 2
# Whether each worker (and so its sandbox children) is pinned to a CPU of its
# own with ``--cpus``, so that its wake-ups of its children stay on one core.
PINNED = False
TICK = 0.010  # the steady-state client submits what is due once per tick


@dataclass
class Fleet:
    """Two running workers and what is needed to account for their CPU."""

    fleet: WorkerFleet
    store: BenchStore

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self.fleet.workers]

    def cpu(self) -> CpuSample:
        return cpu_sample(self.pids, self.store.server_pids)

    def check_alive(self) -> None:
        for worker in self.fleet.workers:
            if not worker.running:
                raise RuntimeError("a worker exited early:\n" + worker.describe())


def worker_config(root: Path) -> Path:
    """A config with the worker's defaults, nothing from the user: only the jobs' module."""
    path = root / "worker.toml"
    path.write_text('[worker]\nmodules = ["bench.jobs"]\n', encoding="utf-8")
    return path


@contextmanager
def running_workers(
    store: BenchStore,
    root: Path,
    *,
    queue: str,
    concurrency: int,
    isolation: str,
    profile_to: Path | None = None,
    pinned: bool | None = None,
) -> Iterator[Fleet]:
    """Start WORKERS ``taskq-worker`` processes (not waiting for them); stop them by pid.

    ``pinned`` (default ``PINNED``) gives worker i ``--cpus`` the i-th CPU
    this process may use, round robin. With ``profile_to``, the first worker
    runs under ``python -m cProfile -o profile_to``.
    """
    root.mkdir(parents=True, exist_ok=True)
    config = worker_config(root)
    env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
    fleet = WorkerFleet(root, env=env)
    common = ["--queues", queue, "--concurrency", str(concurrency), "--isolation", isolation]
    common += ["--config", str(config), "--log-format", "json"]
    cpus = sorted(os.sched_getaffinity(0))
    try:
        for index in range(WORKERS):
            tag = f"{isolation}-{index + 1}"
            pin = ["--cpus", str(cpus[index % len(cpus)])]
            args = common + pin if (PINNED if pinned is None else pinned) else common
            if index == 0 and profile_to is not None:
                argv = [
                    sys.executable,
                    *("-m", "cProfile", "-o", str(profile_to)),
                    *("-m", "taskq.worker.main"),
                    *("--store", store.url, "--name", tag, *args),
                ]
                fleet.launch(tag, argv)
            else:
                fleet.start(store.url, tag=tag, args=args)
        yield Fleet(fleet, store)
    finally:
        fleet.close()


def wait_started(fleet: Fleet, timeout: float = 30.0) -> None:
    for worker in fleet.fleet.workers:
        worker.wait_for_event("worker_started", timeout=timeout)


# -- drain ----------------------------------------------------------------------------------


@dataclass
class Drain:
    jobs: int
    succeeded: int
    spawn_to_last: float  # workers started -> last job finished
    first_to_last: float  # first job claimed -> last job finished
    spawn_to_first: float
    per_worker: dict[str, int]
    cpu: CpuSample
    wrong_results: int
    writes: int  # write transactions while draining (rqlite: count_writes; SQLite: claims)

    @property
    def rate(self) -> float:
        return self.jobs / self.first_to_last if self.first_to_last > 0 else float("nan")

    @property
    def rate_from_spawn(self) -> float:
        return self.jobs / self.spawn_to_last if self.spawn_to_last > 0 else float("nan")


@contextmanager
def draining_workers(
    store: BenchStore,
    client: Client,
    root: Path,
    *,
    queue: str,
    first_id: int,
    jobs: int,
    concurrency: int,
    isolation: str,
    **options: Any,
) -> Iterator[tuple[Fleet, Drain]]:
    """Start the workers on a queued backlog; yield them, still running, with the drain's timing."""
    spawned = time.time()
    with running_workers(
        store, root, queue=queue, concurrency=concurrency, isolation=isolation, **options
    ) as fleet:
        yield (
            fleet,
            measure_drain(
                fleet, client, queue=queue, first_id=first_id, jobs=jobs, spawned=spawned
            ),
        )


def measure_drain(
    fleet: Fleet, client: Client, *, queue: str, first_id: int, jobs: int, spawned: float
) -> Drain:
    """Wait until the ``jobs`` queued jobs from ``first_id`` on have finished; time it.

    ``spawned`` is the wall time just before the workers were started. The
    end is the last ``finished_at`` in the store, not when polling noticed.
    """
    # The workers' CPU starts at zero: only the store's and the bench's need a baseline.
    baseline = cpu_sample([], fleet.store.server_pids)

    def done() -> bool:
        fleet.check_alive()
        return finished_count(client.store, queue) >= jobs

    # SQLite's count comes from the data afterwards: polling the store while it
    # drains took about 5% of the CPU the drain needs.
    raft_entries = fleet.store.name == "rqlite"
    counting = fleet.store.count_writes() if raft_entries else nullcontext({"writes": 0})
    with counting as counted:
        wait_until(done, max(120.0, jobs / 20), f"draining {jobs} jobs", interval=0.05)
    writes = (
        counted["writes"] if raft_entries else claim_transactions(client.store, queue, first_id)
    )
    used = fleet.cpu().minus(baseline)
    found = list(jobs_since(client.store, queue, first_id))
    succeeded = [job for job in found if job.state is JobState.SUCCEEDED]
    starts = [job.started_at for job in found if job.started_at is not None]
    ends = [job.finished_at for job in found if job.finished_at is not None]
    per_worker: dict[str, int] = {}
    wrong = 0
    for job in succeeded:
        per_worker[str(job.worker_id)] = per_worker.get(str(job.worker_id), 0) + 1
        if job.result != job.payload["args"][0]:
            wrong += 1
    return Drain(
        jobs=jobs,
        succeeded=len(succeeded),
        spawn_to_last=max(ends) - spawned,
        first_to_last=max(ends) - min(starts),
        spawn_to_first=min(starts) - spawned,
        per_worker=per_worker,
        cpu=used,
        wrong_results=wrong,
        writes=writes,
    )


def claim_transactions(store: Store, queue: str, first_id: int) -> int:
    """How many write transactions claimed the jobs of ``queue`` from ``first_id`` on.

    Each claim gives its jobs lease tokens with one prefix, and while busy a
    worker's reports ride along with its claims: for a drain this is the
    count of its write transactions, less the last few reports that had
    nothing left to claim.
    """
    rows = store.query(
        Statement(
            "SELECT COUNT(DISTINCT substr(e.lease_token, 1, instr(e.lease_token, '.') - 1))"
            " AS claims FROM executions AS e JOIN jobs ON jobs.id = e.job_id"
            " WHERE jobs.queue = :queue AND jobs.id >= :first_id",
            {"queue": queue, "first_id": first_id},
        )
    )
    return int(rows[0]["claims"])


def broker_only_drain(client: Client, queue: str, *, jobs: int, batch: int) -> dict[str, Any]:
    """The drain with no worker: one process claims ``batch`` jobs, then reports and claims again.

    Each round is one ``job_report_and_claim`` request, as a busy worker sends
    it (results stored, each report fenced by its lease), with nothing run in
    between: the store and the broker's SQL alone, one request at a time.
    """
    enqueue_echo(client, queue, 0, jobs)
    request = ClaimRequest("bench-broker-only", (queue,), batch, 300.0)
    done = 0
    requests = 1
    started = time.perf_counter()
    claimed = plan.run(
        client.store,
        job_claim(request.worker_id, request.queues, limit=batch, lease_seconds=300.0),
    )
    while claimed:
        reports = [
            Report(
                job.lease,
                ReportKind.COMPLETE,
                AttemptReport(outcome="succeeded"),
                result=job.payload["args"][0],
            )
            for job in claimed
        ]
        verdicts, claimed = plan.run(client.store, job_report_and_claim(reports, request))
        if any(verdict is not Fenced.ACCEPTED for verdict in verdicts):
            raise RuntimeError("broker-only drain: a report was refused")
        done += len(reports)
        requests += 1
    seconds = time.perf_counter() - started
    if done != jobs:
        raise RuntimeError(f"broker-only drain finished {done} of {jobs} jobs")
    return {
        "jobs": jobs,
        "batch": batch,
        "seconds": seconds,
        "jobs_per_second": jobs / seconds,
        "ms_per_request": 1000 * seconds / requests,
    }


def enqueue_echo(client: Client, queue: str, first: int, count: int, batch: int = 1000) -> int:
    """Bulk-enqueue ``count`` echo jobs (untimed); the first job's id."""
    ids: list[int] = []
    for start in range(first, first + count, batch):
        specs = [
            call_spec(ECHO, [n], queue=queue)
            for n in range(start, min(first + count, start + batch))
        ]
        ids += [handle.id for handle in client.submit_many(specs)]
    return ids[0]


# -- idle writes -----------------------------------------------------------------------------


def idle_writes(store: BenchStore, fleet: Fleet, seconds: float) -> dict[str, float]:
    """Writes committed while the workers have nothing to do, against their heartbeats."""
    fleet.check_alive()
    time.sleep(1.0)  # let the last reports and claims settle
    before = fleet.cpu()
    with store.count_writes() as counted:
        time.sleep(seconds)
    used = fleet.cpu().minus(before)
    fleet.check_alive()
    heartbeat = WorkerSettings().heartbeat_seconds
    expected = WORKERS * seconds / heartbeat
    return {
        "seconds": seconds,
        "cpu_seconds_workers": round(used.worker_main + used.worker_threads, 3),
        "cpu_seconds_store_server": round(used.store_server, 3),
        "writes": counted["writes"],
        "writes_per_second": counted["writes"] / seconds,
        "heartbeats_expected": expected,
        "heartbeats_per_second": WORKERS / heartbeat,
    }


# -- pickup latency --------------------------------------------------------------------------


def pickup(
    client: Client,
    queue: str,
    *,
    jobs: int,
    spacing: float,
    idle_first: float = 2.0,
    disk: DiskProbe | None = None,
    keep_latencies: bool = False,
) -> dict[str, Any]:
    """Submit ``jobs`` stamp jobs ``spacing`` apart to idle workers; time to each job's first line.

    Latency: from the wall clock read just before ``submit`` to the time the
    job read when it started (its result). The submit call's own duration is
    reported too: on a replicated store it is a commit by quorum. With a
    running ``disk`` probe, the slow pickups (over three times the median)
    are checked against the disk's fsync stalls. ``keep_latencies``: each
    one too (``latencies_ms``), for figures pooled over several calls.
    """
    finished_before = finished_count(client.store, queue)
    time.sleep(idle_first)  # idle workers have backed off to their slowest poll
    submitted: list[tuple[int, float]] = []
    submit_seconds: list[float] = []
    started = time.perf_counter()
    for number in range(jobs):
        due = started + number * spacing
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        before = time.time()
        tick = time.perf_counter()
        handle = client.submit(STAMP, number, queue=queue, unchecked=True)
        submit_seconds.append(time.perf_counter() - tick)
        submitted.append((handle.id, before))
    first_id = submitted[0][0]
    wait_until(
        lambda: finished_count(client.store, queue) >= finished_before + jobs,
        60.0 + jobs * spacing,
        f"pickup of {jobs} jobs",
    )
    found = {job.id: job for job in jobs_since(client.store, queue, first_id)}
    windows = []  # (submitted, started) wall-clock times
    from_write = []  # from the submit's write (its clock, the job's run_at) to the start, ms
    for job_id, before in submitted:
        job = found[job_id]
        if job.state is JobState.SUCCEEDED and isinstance(job.result, float):
            windows.append((before, job.result))
            from_write.append((job.result - job.run_at) * 1000)
    latencies = [(started - before) * 1000 for before, started in windows]
    return {
        "jobs": jobs,
        "spacing_ms": spacing * 1000,
        "succeeded": len(latencies),
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies) if latencies else None,
        "min_ms": min(latencies) if latencies else None,
        "submit_call_p50_ms": percentile([s * 1000 for s in submit_seconds], 0.50),
        "submit_call_p99_ms": percentile([s * 1000 for s in submit_seconds], 0.99),
        **({} if disk is None else _slow_pickups_and_disk(windows, disk)),
        **({"latencies_ms": latencies, "from_write_ms": from_write} if keep_latencies else {}),
    }


def _slow_pickups_and_disk(windows: list[tuple[float, float]], disk: DiskProbe) -> dict[str, Any]:
    """The disk's fsync times during the pickups, and how many slow pickups met a stall."""
    median = percentile([started - before for before, started in windows], 0.50)
    slow = [(before, started) for before, started in windows if started - before > 3 * median]
    return {
        **disk.summary(),
        "slow_pickups": len(slow),
        "slow_pickups_during_stall": sum(disk.overlaps_stall(*window) for window in slow),
    }


# -- steady state ----------------------------------------------------------------------------


def steady(
    client: Client, fleet: Fleet, queue: str, *, rate: float, seconds: float
) -> dict[str, Any]:
    """Submit echo jobs at ``rate`` per second for ``seconds`` while the workers run.

    Every 10 ms tick the client submits the jobs due by then in one request
    (at most 1,000). Throughput is the jobs that
    finished inside the window; what is still queued at its end is cancelled.
    """
    fleet.check_alive()
    ids: list[int] = []
    submit_calls = 0
    cpu_before = fleet.cpu()
    started_wall = time.time()
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(rate * elapsed) - len(ids)
        if due > 0:
            first = len(ids)
            specs = [
                call_spec(ECHO, [n], queue=queue) for n in range(first, first + min(due, 1000))
            ]
            ids += [handle.id for handle in client.submit_many(specs)]
            submit_calls += 1
        # One request per 10 ms tick at most, as a busy submitting service would batch.
        time.sleep(max(0.0, TICK - (time.perf_counter() - started) % TICK))
    ended_wall = time.time()
    used = fleet.cpu().minus(cpu_before)
    # What is still waiting is not part of the measurement: cancel it.
    for start in range(0, len(ids), 1000):
        plan.run(client.store, job_cancel(ids[start : start + 1000]))

    def settled() -> bool:
        counts = queue_counts(client.store, queue)
        return counts[JobState.QUEUED] == 0 and counts[JobState.RUNNING] == 0

    wait_until(settled, 120.0, "the steady-state window's last jobs", interval=0.1)
    jobs = list(jobs_since(client.store, queue, ids[0]))
    inside = [
        job
        for job in jobs
        if job.state is JobState.SUCCEEDED
        and job.finished_at is not None
        and started_wall <= job.finished_at <= ended_wall
    ]
    latencies = [
        (job.finished_at - job.created_at) * 1000 for job in inside if job.finished_at is not None
    ]
    window = ended_wall - started_wall
    cancelled = sum(1 for job in jobs if job.state is JobState.CANCELLED)
    return {
        "offered_per_second": rate,
        "seconds": round(window, 3),
        "submitted": len(ids),
        "submitted_per_second": len(ids) / window,
        "submit_requests": submit_calls,
        "completed_in_window": len(inside),
        "completed_per_second": len(inside) / window,
        "left_queued_and_cancelled": cancelled,
        "latency_p50_ms": percentile(latencies, 0.50),
        "latency_p99_ms": percentile(latencies, 0.99),
        "cpu": used,
        "window": window,
    }
