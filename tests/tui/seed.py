"""Deterministic data for the console tests: queues, workers and jobs in every state.

Everything goes through the broker's operations with ``now`` injected, and
every random input (idempotency keys, retry jitter) is fixed, so the same
``base`` time always gives the same store.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.jobs import job_cancel, job_list
from taskq.broker.ops.leases import Backoff, Report
from taskq.broker.ops.maintenance import worker_mark_lost
from taskq.broker.ops.output import AttemptOutput, OutputChunk
from taskq.broker.ops.queues import queue_set_paused
from taskq.broker.ops.workers import worker_register
from taskq.broker.records import AttemptReport, ClaimedJob, JobSpec, JobState
from taskq.broker.stores.store import Store
from taskq.broker.worker_policy import Policy
from tests.support.reports import completed, failed, released, report_one

BASE = 1_750_000_000.0
"""A fixed "now" (2025-06-15 15:06:40 UTC) for data that must not change between runs."""

LEASE = 300.0
NO_JITTER = Backoff(base=30.0, jitter=0.0)

# Attempts finished per minute, the current minute first: the throughput sparkline's shape.
PER_MINUTE = (2, 4, 3, 6, 5, 7, 3, 2, 4, 6, 3, 5, 2, 4)

WORKERS = (
    # id, name, queues, labels, slots, most slots (autoscaling), policy (None: an older taskq's)
    ("lab-01-7c2e91aa", "lab-01", ("images", "default"), ("gpu",), 4, 8, Policy(("lab.images",))),
    ("lab-02-19f03b5d", "lab-02", ("sims", "etl"), (), 2, None, Policy(("lab",), allow_shell=True)),
    ("lab-03-e4a81f20", "lab-03", ("images",), (), 2, None, None),
)
LAB_01, LAB_02, LAB_03 = (worker[0] for worker in WORKERS)


@dataclass(frozen=True, slots=True)
class Seeded:
    """Ids of jobs in each interesting state, for tests to act on."""

    succeeded: int
    queued: int
    running: int
    failed: int
    dead: int
    cancelled: int
    retrying: int


def _spec(target: str, args: list[Any], queue: str, key: str, max_attempts: int = 3) -> JobSpec:
    return call_spec(
        target,
        args,
        queue=queue,
        idempotency_key=key,
        submitter="ana@lab",
        max_attempts=max_attempts,
        timeout=600,
        limits={"memory_bytes": "512MiB"} if queue == "sims" else None,
    )


def _specs() -> list[JobSpec]:
    specs = [
        _spec("lab.images:resize", [f"scan-{n:04d}.png", 800], "images", f"img-{n}")
        for n in range(sum(PER_MINUTE) + 6)
    ]
    specs += [
        _spec("lab.sims:run", [{"seed": n, "steps": 10_000}], "sims", f"sim-{n}") for n in range(4)
    ]
    specs.append(_spec("lab.sims:run", [{"seed": 99, "steps": 1}], "sims", "sim-once", 1))
    specs += [_spec("lab.etl:clean", [f"2025-06-{n + 1:02d}"], "etl", f"etl-{n}") for n in range(6)]
    return specs


def seed(store: Store, base: float = BASE) -> Seeded:
    """Fill a fresh store; ``base`` is the moment the console's clock should read."""
    run = partial(plan.run, store)
    for index, (worker_id, name, queues, labels, slots, max_slots, policy) in enumerate(WORKERS):
        register = worker_register(
            worker_id,
            name=name,
            host=f"{name}.lab",
            pid=4100 + index,
            queues=queues,
            labels=labels,
            slots=slots,
            max_slots=max_slots,
            policy=policy,
            now=base - 3600,
        )
        run(register)
    for index, spec in enumerate(_specs()):
        run(job_enqueue([spec], now=base - 1800 + index))

    # Images: attempts that finished in each of the last minutes, all successful.
    for minutes_ago, count in enumerate(PER_MINUTE):
        done = base - 60 * minutes_ago - 30
        claimed = run(
            job_claim(LAB_01, ["images"], limit=count, lease_seconds=LEASE, now=done - 12)
        )
        for job in claimed:
            report = AttemptReport(
                outcome="succeeded",
                exit_code=0,
                peak_rss_bytes=(180 + job.lease.job_id) << 20,
                cpu_seconds=9.5,
            )
            result = {"width": 800, "bytes": 48_213 + job.lease.job_id}
            printed = f"loaded {job.payload['args'][0]}\nresized to 800 px\n"
            run(report_one(_printed(completed(job.lease, result, report), printed), now=done))

    # Sims: one fails and will retry, one fails for good, one is dead after its only try.
    # Every attempt ends mid-minute, well clear of the minute boundaries by which
    # the broker counts throughput, so a snapshot taken seconds later counts the same.
    t = base - 390
    first = run(job_claim(LAB_02, ["sims"], limit=2, lease_seconds=LEASE, now=t))
    _fail(store, first[0], "OverflowError", "step 6120 diverged", retryable=True, now=t + 40)
    _fail(store, first[1], "ValueError", "seed 1 is not allowed", retryable=False, now=t + 41)
    rest = run(job_claim(LAB_02, ["sims"], limit=8, lease_seconds=LEASE, now=t + 50))
    for job in rest:
        if job.max_attempts == 1:
            _fail(store, job, "MemoryError", "limit 512 MiB reached", retryable=True, now=t + 80)
        else:
            run(report_one(released(job.lease), now=t + 80))
    dead = next(job.lease.job_id for job in rest if job.max_attempts == 1)

    # ETL: one job cancelled while queued, then the queue paused.
    cancelled = min(_ids(store, JobState.QUEUED, "etl"))
    run(job_cancel([cancelled], now=base - 200))
    run(queue_set_paused("etl", True, now=base - 100))

    # Work in progress on two workers; the third stopped heartbeating an hour ago.
    images = run(job_claim(LAB_01, ["images"], limit=2, lease_seconds=LEASE, now=base - 25))
    run(job_heartbeat(LAB_01, [job.lease for job in images], lease_seconds=LEASE, now=base - 2))
    sims = run(job_claim(LAB_02, ["sims"], limit=1, lease_seconds=LEASE, now=base - 15))
    run(job_heartbeat(LAB_02, [job.lease for job in sims], lease_seconds=LEASE, now=base - 4))
    run(worker_mark_lost(grace_seconds=60, now=base))

    return Seeded(
        succeeded=min(_ids(store, JobState.SUCCEEDED)),
        queued=max(_ids(store, JobState.QUEUED, "images")),
        running=images[0].lease.job_id,
        failed=first[1].lease.job_id,
        dead=dead,
        cancelled=cancelled,
        retrying=first[0].lease.job_id,
    )


def _fail(
    store: Store, job: ClaimedJob, kind: str, message: str, *, retryable: bool, now: float
) -> None:
    error = {
        "type": kind,
        "message": message,
        "traceback": (
            "Traceback (most recent call last):\n"
            '  File "lab/sims.py", line 42, in run\n'
            f"{kind}: {message}"
        ),
    }
    report = AttemptReport(
        outcome="error",
        exit_code=1,
        peak_rss_bytes=96 << 20,
        cpu_seconds=31.2,
    )
    printed = _printed(
        failed(job.lease, error, report, retryable=retryable), "step 6000\nstep 6100\n"
    )
    op = report_one(printed, backoff=NO_JITTER, now=now)
    plan.run(store, op)


def _ids(store: Store, state: JobState, queue: str | None = None) -> list[int]:
    return [job.id for job in plan.run(store, job_list(state=state, queue=queue, limit=1000))]


def _printed(report: Report, text: str) -> Report:
    """``report`` carrying ``text`` as its attempt's output, as a worker's last chunk."""
    chunk = OutputChunk(0, len(text.encode()), text)
    output = AttemptOutput(report.lease, (chunk,), keep_bytes=1 << 20)
    return msgspec.structs.replace(report, output=output)
