"""A worker's states as the store keeps them, on both stores: active, draining, stopped, lost.

Workers are stood in for by their writes, at injected times (``now=``); the
acceptance tier drains a real worker (tests/acceptance/test_worker_lifecycle.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.functions import queue_served_list
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.maintenance import worker_mark_lost
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workers import worker_list, worker_register, worker_set_state
from taskq.broker.records import WorkerInfo
from taskq.broker.stores.store import Store
from taskq.broker.unserved import unserved_queue

T0 = 1_800_000_000.0  # an injected store time, far from the real clock
GRACE = 30.0


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def _run(store: Store, op: Op[Any]) -> Any:
    return plan.run(store, op)


def _register(store: Store, queue: str, now: float) -> str:
    worker_id = f"worker-{uuid.uuid4().hex[:8]}"
    _run(
        store,
        worker_register(
            worker_id, name="lab", host="h", pid=1, queues=[queue], labels=[], slots=1, now=now
        ),
    )
    return worker_id


def _info(store: Store, worker_id: str) -> WorkerInfo:
    [info] = [each for each in _run(store, worker_list()) if each.id == worker_id]
    return info


def test_a_draining_worker_stays_draining_and_live_while_it_heartbeats(
    store: Store, queue: str
) -> None:
    worker = _register(store, queue, T0)
    _run(store, worker_set_state(worker, "draining", now=T0 + 5))
    _run(store, job_heartbeat(worker, [], lease_seconds=GRACE, now=T0 + 30))
    assert _info(store, worker).state == "draining", "a heartbeat made it active again"
    # Its last heartbeat is 25 s old: live still, as an active worker would be.
    assert worker not in _run(store, worker_mark_lost(grace_seconds=GRACE, now=T0 + 55))
    assert _info(store, worker).state == "draining"
    assert queue in _run(store, queue_served_list())
    # Its heartbeats stopped: lost, as an active worker would be.
    assert worker in _run(store, worker_mark_lost(grace_seconds=GRACE, now=T0 + 61))
    assert _info(store, worker).state == "lost"


def test_a_draining_worker_marked_lost_is_draining_again_once_heard(
    store: Store, queue: str
) -> None:
    draining = _register(store, queue, T0)
    active = _register(store, queue, T0)
    _run(store, worker_set_state(draining, "draining", now=T0 + 5))
    _run(store, job_heartbeat(active, [], lease_seconds=GRACE, now=T0 + 5))
    # Both fall silent past the grace (a paused process, a cut network): maintenance's
    # mark overwrites 'draining'.
    marked = _run(store, worker_mark_lost(grace_seconds=GRACE, now=T0 + 40))
    assert {draining, active} <= set(marked)
    assert _info(store, draining).state == "lost"
    # Heard again, each is back as it was: the draining one's heartbeat says it drains.
    _run(store, job_heartbeat(draining, [], lease_seconds=GRACE, draining=True, now=T0 + 41))
    _run(store, job_heartbeat(active, [], lease_seconds=GRACE, now=T0 + 41))
    assert (_info(store, draining).state, _info(store, active).state) == ("draining", "active")


def test_a_stopped_worker_is_not_made_draining_by_a_late_write(store: Store, queue: str) -> None:
    worker = _register(store, queue, T0)
    _run(store, worker_set_state(worker, "draining", now=T0 + 1))
    _run(store, worker_set_state(worker, "stopped", now=T0 + 2))
    # A drain's write retried after its answer was lost lands after the worker left.
    _run(store, worker_set_state(worker, "draining", now=T0 + 3))
    info = _info(store, worker)
    assert (info.state, info.heartbeat_at) == ("stopped", pytest.approx(T0 + 2, abs=0.2))
    assert queue not in _run(store, queue_served_list())


def test_a_queue_only_draining_workers_take_has_no_active_worker_to_serve_it(
    store: Store, queue: str
) -> None:
    draining = _register(store, queue, T0)
    _run(store, worker_set_state(draining, "draining", now=T0 + 1))
    [job_id] = _run(store, job_enqueue([call_spec("tests.support.jobs:echo", [1], queue=queue)]))
    job = _run(store, job_get(job_id))
    mine = [each for each in _run(store, worker_list()) if each.queues == (queue,)]
    assert unserved_queue([job], mine) == (
        f"no active worker serves queue {queue!r} "
        f"(start one: taskq-worker --queues {queue} --modules tests.support.jobs)"
    )
    _register(store, queue, T0 + 2)
    mine = [each for each in _run(store, worker_list()) if each.queues == (queue,)]
    assert unserved_queue([job], mine) is None
