"""A draining worker's state reaches the store, and a store that fails meanwhile ends nothing;
marked lost meanwhile, it is draining again at its next heartbeat."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.maintenance import worker_mark_lost
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workers import worker_list, worker_register, worker_set_state
from taskq.broker.stores.store import Store
from taskq.worker.draining_state import write_draining
from taskq.worker.events import EventLog
from taskq.worker.heartbeat import Heartbeat, LeaseHolder
from taskq.worker.prefetch import Prefetch
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import store_runner

pytestmark = pytest.mark.anyio

WORKER = "w-1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    plan.run(
        opened,
        worker_register(WORKER, name="w", host="h", pid=1, queues=["q"], labels=[], slots=1),
    )
    try:
        yield opened
    finally:
        opened.close()


class FailingFirst:
    """Runs operations on ``store``, refusing the first ``failures`` as an unreachable store."""

    def __init__(self, store: Store, failures: int) -> None:
        self._run = store_runner(store)
        self.failures = failures
        self.calls = 0

    async def __call__(self, op: Op[Any]) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            op.close()
            raise errors.StoreUnavailable("rqlite at 127.0.0.1:4001: connection refused")
        return await self._run(op)


async def _write(
    run: FailingFirst,
    draining: anyio.Event,
    stopped: anyio.Event,
    outage: StoreOutage | None = None,
) -> None:
    """``write_draining`` for ``WORKER``, trying again at once, as it were every heartbeat."""
    outage = outage or StoreOutage(EventLog(io.StringIO()), WORKER)
    await write_draining(
        run, WORKER, draining=draining, stopped=stopped, outage=outage, retry_seconds=0.01
    )


def _state(store: Store) -> str:
    [worker] = plan.run(store, worker_list())
    return worker.state


async def test_the_drain_is_written_once_the_store_answers_again(store: Store) -> None:
    stream = io.StringIO()
    outage = StoreOutage(EventLog(stream, format="json"), WORKER)
    run = FailingFirst(store, failures=2)
    draining, stopped = anyio.Event(), anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_write, run, draining, stopped, outage)
            assert run.calls == 0
            assert _state(store) == "active", "written before the drain began"
            draining.set()
    assert (run.calls, _state(store)) == (3, "draining")
    told = [json.loads(line)["event"] for line in stream.getvalue().splitlines()]
    assert told == ["store_unavailable", "store_recovered"]


async def test_a_store_that_never_answers_ends_the_attempts_when_the_worker_stops(
    store: Store,
) -> None:
    run = FailingFirst(store, failures=10**9)
    draining, stopped = anyio.Event(), anyio.Event()
    draining.set()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_write, run, draining, stopped)
            while run.calls < 3:
                await anyio.sleep(0.01)
            stopped.set()
    assert _state(store) == "active"


async def test_a_worker_that_stops_without_draining_writes_nothing(store: Store) -> None:
    run = FailingFirst(store, failures=0)
    stopped = anyio.Event()
    stopped.set()
    with anyio.fail_after(10):
        await _write(run, anyio.Event(), stopped)
    assert run.calls == 0


async def test_a_draining_worker_marked_lost_is_draining_again_at_its_next_heartbeat(
    store: Store,
) -> None:
    """Maintenance's mark overwrites 'draining'; the heartbeat of a draining worker says it
    drains, so the worker comes back draining, not active (claiming nothing, it must not
    count as serving its queues)."""
    settings = WorkerSettings(queues=("q",))
    deadline = LeaseDeadline(
        lease_seconds=settings.lease_seconds, margin_seconds=settings.lease_margin_seconds
    )
    holder = LeaseHolder(
        run=store_runner(store),
        worker_id=WORKER,
        settings=settings,
        slots=Slots(1, Prefetch(slots=1, most=0)),
        deadline=deadline,
    )
    events = EventLog(io.StringIO())
    draining, stopped = anyio.Event(), anyio.Event()
    heartbeat = Heartbeat(
        holder,
        outage=StoreOutage(events, WORKER),
        events=events,
        maintainer=None,
        draining=draining,
    )
    plan.run(store, worker_set_state(WORKER, "draining"))
    draining.set()
    # Its heartbeats stopped for a minute (a paused process, a cut network).
    marked = plan.run(store, worker_mark_lost(grace_seconds=30, now=time.time() + 60))
    assert (marked, _state(store)) == ([WORKER], "lost")
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(heartbeat.run, stopped)
                while _state(store) == "lost":
                    await anyio.sleep(0.01)
                stopped.set()
    finally:
        deadline.close()
    assert _state(store) == "draining"
