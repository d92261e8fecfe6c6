"""Per-job cost of the sandbox alone: no-op jobs through ``PoolSandbox`` and ``Sandbox``.

No store and no worker loop: one job after another from one event loop,
with the default limits, as a worker slot would run them.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from taskq.broker.limits import Limits
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.outcome import Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from taskq.worker.settings import WorkerSettings


async def _run_jobs(sandbox: Sandbox, jobs: int) -> list[float]:
    limits = Limits()
    timings = []
    for number in range(jobs):
        started = time.perf_counter()
        outcome = await sandbox.run(CallPayload("bench.jobs:echo", [number], {}), limits)
        timings.append(time.perf_counter() - started)
        if outcome.status is not Status.SUCCEEDED or outcome.result != number:
            raise RuntimeError(f"a no-op job in the sandbox ended {outcome}")
    return timings


def _measure(make: Any, jobs: int) -> dict[str, Any]:
    async def main() -> list[float]:
        async with make() as sandbox:
            # One job first: a pool child is spawned on first use.
            await _run_jobs(sandbox, 1)
            return await _run_jobs(sandbox, jobs)

    timings = anyio.run(main)
    ordered = sorted(timings)
    return {
        "jobs": jobs,
        "ms_per_job": 1000 * sum(timings) / jobs,
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "max_ms": 1000 * ordered[-1],
    }


def sandbox_overhead(pool_jobs: int, process_jobs: int) -> dict[str, dict[str, Any]]:
    recycle = WorkerSettings().pool_recycle_after
    jobs = Policy(modules=("bench.jobs",))
    return {
        "pool": _measure(
            lambda: PoolSandbox(preparer=JobPreparer(policy=jobs), max_jobs_per_child=10**9),
            pool_jobs,
        ),
        "pool_recycled": {
            **_measure(
                lambda: PoolSandbox(preparer=JobPreparer(policy=jobs), max_jobs_per_child=recycle),
                pool_jobs,
            ),
            "recycle_after": recycle,
        },
        "process": _measure(lambda: Sandbox(preparer=JobPreparer(policy=jobs)), process_jobs),
    }
