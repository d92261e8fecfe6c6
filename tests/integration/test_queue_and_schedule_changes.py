"""Changes by name create nothing by accident: pausing queues, adding schedules; and idle workers.

A misspelt queue name must not quietly become a new paused queue, and a
schedule of a name already taken must not be replaced without being asked
to. Run on both stores; names are unique per test (the cluster is shared).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

import taskq
from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.jobs import job_cancel
from taskq.broker.ops.maintenance import job_prune, worker_mark_lost
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import job_counts, queue_set_limits, queue_set_paused
from taskq.broker.ops.schedules import (
    schedule_add,
    schedule_fire_due,
    schedule_list,
    schedule_remove,
)
from taskq.broker.ops.workers import worker_list, worker_register, worker_set_state
from taskq.broker.stores.store import Statement, Store

T = TypeVar("T")
T0 = 1_800_000_000.0


@pytest.fixture
def name() -> str:
    return f"qs-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def run(store: Store) -> Callable[[Op[Any]], Any]:
    def carry_out(op: Op[T]) -> T:
        return plan.run(store, op)

    return carry_out


def _paused(run: Callable[[Op[Any]], Any], queue: str) -> bool | None:
    """Whether the queue is paused; None when the store knows no such queue."""
    found = [stats.paused for stats in run(job_counts()) if stats.queue == queue]
    return found[0] if found else None


# -- pause and resume --------------------------------------------------------------------------


@pytest.mark.parametrize("paused", [True, False])
def test_pausing_or_resuming_an_unknown_queue_is_an_error(
    run: Callable[[Op[Any]], Any], name: str, paused: bool
) -> None:
    with pytest.raises(errors.QueueNotFound, match=f"no queue named '{name}'"):
        run(queue_set_paused(name, paused, now=T0))
    assert _paused(run, name) is None


def test_a_queue_is_known_by_its_jobs_or_its_settings(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    with_jobs, with_limits = f"{name}-jobs", f"{name}-limits"
    run(job_enqueue([call_spec("m:f", queue=with_jobs)], now=T0))
    run(queue_set_limits(with_limits, max_running=3, create=True, now=T0))
    for queue in (with_jobs, with_limits):
        run(queue_set_paused(queue, True, now=T0))
        assert _paused(run, queue) is True
        run(queue_set_paused(queue, False, now=T0))
        assert _paused(run, queue) is False


def test_create_pauses_a_queue_ahead_of_its_first_job(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    run(queue_set_paused(name, True, create=True, now=T0))
    assert _paused(run, name) is True
    run(job_enqueue([call_spec("m:f", queue=name)], now=T0))
    assert run(job_claim("w", [name], limit=1, lease_seconds=30, now=T0 + 1)) == []


def test_the_client_refuses_unknown_queues_unless_asked_to_create(store: Store, name: str) -> None:
    client = taskq.Client(store=store)
    with pytest.raises(errors.TaskqError, match="create"):
        client.pause(name)
    with pytest.raises(errors.QueueNotFound, match="no queue named"):
        client.resume(name)
    client.pause(name, create=True)
    assert [s.paused for s in client.stats() if s.queue == name] == [True]
    client.resume(name)
    # Resumed, with no jobs and no other setting: gone, as if never set up.
    assert [s.paused for s in client.stats() if s.queue == name] == []
    for refused in (
        lambda: client.set_queue_limits(name, max_running=2),
        lambda: client.set_queue_defaults(name, timeout=60),
    ):
        with pytest.raises(errors.QueueNotFound, match="--create, create=True"):
            refused()
    assert name not in {s.queue for s in client.stats()}
    client.set_queue_limits(name, max_running=2, create=True)
    client.set_queue_defaults(name, timeout=60)  # it exists now: its settings say so
    [stats] = [s for s in client.stats() if s.queue == name]
    assert (stats.max_running, stats.job_defaults) == (2, {"timeout": 60.0})
    client.set_queue_limits(name, max_running=None)
    assert name in {s.queue for s in client.stats()}  # its default timeout is left
    client.set_queue_defaults(name, timeout=None)
    assert name not in {s.queue for s in client.stats()}


# -- schedules ---------------------------------------------------------------------------------


def test_adding_a_schedule_of_a_taken_name_is_an_error_unless_replacing(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    first = run(schedule_add(name, call_spec("m:f", [1]), every_seconds=60, now=T0))
    assert not first.replaced
    other = call_spec("m:g", [2], queue=name)
    with pytest.raises(errors.ScheduleExists, match=f"schedule '{name}' already exists"):
        run(schedule_add(name, other, every_seconds=30, now=T0 + 5))
    [kept] = [s for s in run(schedule_list()) if s.name == name]
    assert (kept.spec["payload"], kept.timing.every_seconds) == (first.schedule.spec["payload"], 60)

    replaced = run(schedule_add(name, other, every_seconds=30, replace=True, now=T0 + 5))
    assert replaced.replaced
    [now_listed] = [s for s in run(schedule_list()) if s.name == name]
    assert (now_listed.timing.every_seconds, now_listed.spec["queue"]) == (30, name)
    assert now_listed.next_fire_at == T0 + 35
    assert run(schedule_remove(name))


def test_adding_a_schedule_exactly_as_it_stands_changes_nothing(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    """So a set-up script can run twice, and a resent add finds its own schedule."""
    spec = call_spec("m:f", [1], queue=name)
    first = run(schedule_add(name, spec, cron="0 3 * * *", timezone="Europe/Berlin", now=T0))
    again = run(schedule_add(name, spec, cron="0 3 * * *", timezone="Europe/Berlin", now=T0 + 60))
    assert not again.replaced
    assert again.schedule == first.schedule
    assert run(schedule_remove(name))


def test_replace_of_a_schedule_that_does_not_exist_creates_it(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    added = run(schedule_add(name, call_spec("m:f"), every_seconds=60, replace=True, now=T0))
    assert not added.replaced
    assert [s.name for s in run(schedule_list()) if s.name == name] == [name]
    assert run(schedule_remove(name))


# -- workers -----------------------------------------------------------------------------------


def _register(run: Callable[[Op[Any]], Any], worker: str, queue: str) -> None:
    run(
        worker_register(
            worker, name=worker, host="h", pid=1, queues=[queue], labels=[], slots=4, now=T0
        )
    )


def _busy(run: Callable[[Op[Any]], Any], worker: str) -> tuple[str, int]:
    [info] = [w for w in run(worker_list()) if w.id == worker]
    return info.state, info.running


def test_stopped_and_lost_workers_are_shown_with_no_busy_slots(
    run: Callable[[Op[Any]], Any], name: str
) -> None:
    stopped, lost = f"{name}-stopped", f"{name}-lost"
    run(job_enqueue([call_spec("m:f", [n], queue=name) for n in range(8)], now=T0))
    for worker in (stopped, lost):
        _register(run, worker, name)
        leases = [
            job.lease for job in run(job_claim(worker, [name], limit=4, lease_seconds=30, now=T0))
        ]
        run(job_heartbeat(worker, leases, lease_seconds=30, now=T0 + 1))
        assert _busy(run, worker) == ("active", 4)
    run(worker_set_state(stopped, "stopped", now=T0 + 2))
    assert _busy(run, stopped) == ("stopped", 0)
    assert lost in run(worker_mark_lost(grace_seconds=30, now=T0 + 100))
    assert _busy(run, lost) == ("lost", 0)
    # A lost worker that heartbeats again is active, with its slots as it reports them.
    run(job_heartbeat(lost, [], lease_seconds=30, busy=2, now=T0 + 101))
    assert _busy(run, lost) == ("active", 2)


def _fires(store: Store, name: str) -> int:
    [row] = store.query(
        Statement("SELECT count(*) AS n FROM schedule_fires WHERE schedule = :name", {"name": name})
    )
    return int(row["n"])


def test_a_ticks_record_goes_with_its_job_and_a_schedules_with_it(
    run: Callable[[Op[Any]], Any], store: Store, name: str
) -> None:
    run(schedule_add(name, call_spec("m:f", queue=name), every_seconds=60, now=T0))
    fired = [run(schedule_fire_due(now=T0 + 60 * tick)) for tick in (1, 2)]
    jobs = [each.job_id for batch in fired for each in batch if each.schedule == name]
    assert len(jobs) == 2, fired
    assert _fires(store, name) == 2
    # The first tick's job ends and is pruned: its record goes; the other tick's stays.
    run(job_cancel(jobs[:1], now=T0 + 130))
    run(job_prune(retention_seconds=10.0, now=T0 + 200))
    assert _fires(store, name) == 1
    assert run(schedule_remove(name))
    assert _fires(store, name) == 0
