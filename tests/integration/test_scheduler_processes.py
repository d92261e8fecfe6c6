"""Three scheduler processes race on the same schedules; every tick is enqueued once."""

from __future__ import annotations

import uuid
from typing import Any

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_list
from taskq.broker.ops.schedules import schedule_add, schedule_fire_due
from tests.support.processes import run_together

T0 = 1_900_000_000.0
PROCESSES = 3


def _scheduler(url: str, name: str, times: list[float], barrier: Any, out: Any) -> None:
    try:
        store = open_store(url)
        barrier.wait(timeout=60)
        fired = 0
        for now in times:
            # A round fires every due schedule; other tests' share this store.
            done = plan.run(store, schedule_fire_due(now=now))
            fired += sum(1 for tick in done if tick.schedule == name)
        store.close()
        out.put(fired)
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def _race(url: str, name: str, times: list[float]) -> list[int]:
    return [int(fired) for fired in run_together(_scheduler, (url, name, times), PROCESSES)]


def test_each_tick_is_enqueued_once_by_racing_schedulers(url: str) -> None:
    queue = f"sched-{uuid.uuid4().hex[:8]}"
    name = f"minutely-{queue}"
    store = open_store(url)
    try:
        plan.run(store, schedule_add(name, call_spec("m:f", queue=queue), every_seconds=60, now=T0))
        # Every process walks the same injected clock, in small steps, at once.
        fired = _race(url, name, [T0 + step * 7.0 for step in range(1, 87)])
        jobs = plan.run(store, job_list(queue=queue, limit=1000))
        run_ats = sorted(job.run_at for job in jobs)
        assert run_ats == [T0 + 60.0 * tick for tick in range(1, 11)]
        assert sum(fired) == 10

        # Then no scheduler runs for an hour: one catch-up job, for the latest tick.
        fired = _race(url, name, [T0 + 4000.0, T0 + 4001.0])
        jobs = plan.run(store, job_list(queue=queue, limit=1000))
        assert sorted(job.run_at for job in jobs)[10:] == [T0 + 3960.0]
        assert sum(fired) == 1
    finally:
        store.close()
