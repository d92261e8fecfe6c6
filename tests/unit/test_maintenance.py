from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from taskq import errors
from taskq.broker.client.client import Client, call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import maintenance, plan, queries
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.leader import leader_attempt_elect
from taskq.broker.ops.maintenance import (
    LeaseRequeuer,
    LostWorkerMarker,
    Maintainer,
    Pruner,
    job_requeue_expired,
)
from taskq.broker.ops.schedules import schedule_add
from taskq.broker.ops.workers import worker_register
from taskq.broker.records import JobState
from taskq.broker.stores.store import Store
from tests.support.reports import completed, report_one

T0 = 1_800_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite://{tmp_path / 'm.db'}")


def _running_job(store: Store, max_attempts: int = 2) -> int:
    [job_id] = plan.run(store, job_enqueue([call_spec("m:f", max_attempts=max_attempts)], now=T0))
    plan.run(store, job_claim("w", ["default"], limit=1, lease_seconds=10, now=T0))
    return int(job_id)


def test_each_service_reports_what_it_did(store: Store) -> None:
    job_id = _running_job(store)
    plan.run(
        store,
        worker_register(
            "w", name="w", host="h", pid=1, queues=["default"], labels=[], slots=1, now=T0
        ),
    )
    assert maintenance.run_once(store, LeaseRequeuer(), now=T0 + 5) == {
        "requeued": 0,
        "dead": 0,
        "cancelled": 0,
    }
    assert maintenance.run_once(store, LeaseRequeuer(), now=T0 + 11) == {
        "requeued": 1,
        "dead": 0,
        "cancelled": 0,
    }
    assert maintenance.run_once(store, LostWorkerMarker(grace_seconds=30), now=T0 + 31) == {
        "lost": 1
    }
    [claimed] = plan.run(store, job_claim("w", ["default"], limit=1, lease_seconds=10, now=T0 + 12))
    plan.run(store, report_one(completed(claimed.lease, "ok"), now=T0 + 13))
    pruner = Pruner(retention_seconds=100)
    assert maintenance.run_once(store, pruner, now=T0 + 50) == {"pruned": 0}
    assert maintenance.run_once(store, pruner, now=T0 + 200) == {"pruned": 1}
    with pytest.raises(errors.JobNotFound):
        Client(store=store).get(job_id)


def test_only_the_leader_runs_the_services(store: Store) -> None:
    job_id = _running_job(store)
    first = Maintainer(store, holder="a", services=[LeaseRequeuer()], lease_seconds=10)
    second = Maintainer(store, holder="b", services=[LeaseRequeuer()], lease_seconds=10)
    assert plan.run(store, first.plan_tick(now=T0 + 11)) == {
        "requeue_expired": {"requeued": 1, "dead": 0, "cancelled": 0}
    }
    assert plan.run(store, second.plan_tick(now=T0 + 12)) == {}
    assert (first.is_leader, second.is_leader) == (True, False)
    # The leader stops ticking; once its lease lapses the other takes over.
    assert plan.run(store, second.plan_tick(now=T0 + 22)) != {}
    assert second.is_leader
    assert plan.run(store, job_get(job_id)).state is JobState.QUEUED


def test_services_wait_for_their_interval(store: Store) -> None:
    leader = Maintainer(store, holder="a", services=[LeaseRequeuer(interval=3600)])
    assert "requeue_expired" in plan.run(store, leader.plan_tick(now=T0))
    assert plan.run(store, leader.plan_tick(now=T0 + 1)) == {}


@pytest.mark.parametrize(
    ("build", "complaint"),
    [
        (lambda: LeaseRequeuer(interval=0), "requeue interval"),
        (lambda: LostWorkerMarker(grace_seconds=-1), "grace"),
        (lambda: Pruner(retention_seconds=float("nan")), "retention"),
    ],
)
def test_configs_are_validated(build: object, complaint: str) -> None:
    with pytest.raises(errors.ConfigError, match=complaint):
        build()  # type: ignore[operator]


def test_the_lease_must_outlast_two_ticks(store: Store) -> None:
    with pytest.raises(errors.ConfigError, match="outlast two ticks"):
        Maintainer(store, holder="a", tick_seconds=5, lease_seconds=8)


def test_the_loop_runs_until_stopped_and_resigns(store: Store) -> None:
    job_id = _running_job(store, max_attempts=1)
    leader = Maintainer(
        store,
        holder="loop",
        services=[LeaseRequeuer(interval=0.01)],
        tick_seconds=0.02,
        lease_seconds=1,
    )

    async def scenario() -> None:
        stop = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: leader.run_forever(stop=stop))
            with anyio.fail_after(20):
                # Store time moves on by itself; the 10 s lease of the job lapses.
                while plan.run(store, job_get(job_id)).state is JobState.RUNNING:
                    plan.run(store, job_requeue_expired(now=T0 + 11))
                    await anyio.sleep(0.02)
            stop.set()

    anyio.run(scenario)
    assert plan.run(store, job_get(job_id)).state is JobState.DEAD
    assert plan.run(store, leader_attempt_elect("maintenance", "other", ttl_seconds=5))


def test_the_scheduler_service_fires_due_ticks(store: Store) -> None:
    plan.run(store, schedule_add("tick", call_spec("m:f"), every_seconds=30, now=T0))
    assert maintenance.run_once(store, maintenance.Scheduler(), now=T0 + 10) == {"fired": 0}
    assert maintenance.run_once(store, maintenance.Scheduler(), now=T0 + 31) == {"fired": 1}
    assert maintenance.run_once(store, maintenance.Scheduler(), now=T0 + 32) == {"fired": 0}


def test_idle_maintenance_writes_only_to_renew_its_lease(store: Store) -> None:
    writes: list[int] = []
    execute = store.execute

    def counting(statements: object, **options: object) -> object:
        writes.append(1)
        return execute(statements, **options)  # type: ignore[arg-type]

    store.execute = counting  # type: ignore[method-assign]
    leader = Maintainer(store, holder="idle", lease_seconds=9)
    follower = Maintainer(store, holder="other", lease_seconds=9)
    for second in range(30):
        plan.run(store, leader.plan_tick(now=T0 + second))
        plan.run(store, follower.plan_tick(now=T0 + second))
    # Nothing to requeue, mark or prune, and the follower only read: the
    # leader's lease renewals (every 3 s) are the only writes.
    assert len(writes) == 10
    assert (leader.is_leader, follower.is_leader) == (True, False)
    # Once the leader stops renewing, the follower takes over after the lease.
    plan.run(store, follower.plan_tick(now=T0 + 30 + 9))
    assert follower.is_leader


def test_a_leader_renewed_by_heartbeats_writes_nothing_of_its_own(store: Store) -> None:
    writes: list[str] = []
    execute = store.execute

    def counting(statements: list[Any], **options: Any) -> Any:
        is_heartbeat = any(st.sql == queries.query("worker_heartbeat") for st in statements)
        writes.append("heartbeat" if is_heartbeat else "maintenance")
        return execute(statements, **options)

    store.execute = counting  # type: ignore[method-assign]
    leader = Maintainer(store, holder="idle", lease_seconds=15, renewed_by_heartbeat=True)
    follower = Maintainer(store, holder="other", lease_seconds=15, renewed_by_heartbeat=True)

    def heartbeat(second: int) -> None:
        renew = leader.heartbeat_renewal()
        beat = plan.run(
            store, job_heartbeat("idle", [], lease_seconds=30, renew=renew, now=T0 + second)
        )
        if renew is not None:
            assert beat.leader_held is not None
            leader.heartbeat_renewed(beat.leader_held, sent_at=T0 + second)

    for second in range(30):
        if second % 5 == 0:
            heartbeat(second)
        plan.run(store, leader.plan_tick(now=T0 + second))
        plan.run(store, follower.plan_tick(now=T0 + second))
    # The first tick elects; from then on the heartbeats renew and the ticks only read.
    assert writes.count("maintenance") == 1
    assert writes.count("heartbeat") == 6
    assert (leader.is_leader, follower.is_leader) == (True, False)
    # Heartbeats stop (the last renewed at 25): the tick renews itself at two thirds.
    for second in range(30, 50):
        plan.run(store, leader.plan_tick(now=T0 + second))
        plan.run(store, follower.plan_tick(now=T0 + second))
    assert writes.count("maintenance") == 3  # at 35 and 45
    assert (leader.is_leader, follower.is_leader) == (True, False)


class _Outage:
    """A real store that answers StoreUnavailable for as long as ``down`` says."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.down = True
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def execute_async(self, *args: Any, **kwargs: Any) -> Any:
        return await self._through(self.inner.execute_async, *args, **kwargs)

    async def query_async(self, *args: Any, **kwargs: Any) -> Any:
        return await self._through(self.inner.query_async, *args, **kwargs)

    async def _through(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            self.refused += 1
            raise errors.StoreUnavailable("no leader (test outage)")
        return await call(*args, **kwargs)


def _through_an_outage(
    maintainer: Maintainer, outage: _Outage, caplog: pytest.LogCaptureFixture
) -> None:
    """Run ``maintainer`` through a few failed ticks, until it says it ticks again and leads."""

    async def scenario() -> None:
        stop = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: maintainer.run_forever(stop=stop))
            with anyio.fail_after(10):
                while outage.refused < 5:
                    await anyio.sleep(0.01)
            outage.down = False
            with anyio.fail_after(10):
                while "maintenance ticks again" not in caplog.text or not maintainer.is_leader:
                    await anyio.sleep(0.01)
            # Elected, it runs its services in the same tick; a few more go by.
            await anyio.sleep(0.1)
            stop.set()

    with caplog.at_level("INFO", logger="taskq.maintenance"):
        anyio.run(scenario)


def test_an_outage_is_logged_once_and_its_end_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    outage = _Outage(store)
    maintainer = Maintainer(
        outage,  # type: ignore[arg-type]
        holder="a",
        services=[LeaseRequeuer()],
        tick_seconds=0.01,
        lease_seconds=1,
    )
    _through_an_outage(maintainer, outage, caplog)
    failures = [r for r in caplog.records if "maintenance tick failed" in r.getMessage()]
    assert len(failures) == 1, caplog.text
    assert caplog.text.count("maintenance ticks again") == 1


def test_after_an_outage_expired_leases_wait_for_their_workers_to_be_heard(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # A job that ran through the outage: its lease (claimed at T0) has long expired.
    job_id = _running_job(store, max_attempts=1)
    outage = _Outage(store)
    maintainer = Maintainer(
        outage,  # type: ignore[arg-type]
        holder="a",
        services=[LeaseRequeuer(interval=0.01)],
        tick_seconds=0.01,
        lease_seconds=1,
        after_outage_seconds=3600,
    )
    _through_an_outage(maintainer, outage, caplog)
    assert plan.run(store, job_get(job_id)).state is JobState.RUNNING
    # A maintainer that saw no outage requeues expired leases at once (here: dead).
    assert maintenance.run_once(store, LeaseRequeuer(), now=T0 + 10**6)["dead"] == 1
