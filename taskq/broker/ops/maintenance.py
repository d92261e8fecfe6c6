"""Maintenance services: requeue expired leases, fire schedules, mark lost workers, prune.

Each service has a validated config, a ``plan_once()`` (and ``run_once()``)
that does one round and returns what it did, and an interval. A
:class:`Maintainer` runs them from any process: it ticks, takes or keeps the
store's leader lease, runs the services that are due only while it holds the
lease, logs failures and carries on. The services are idempotent, so two
leaders for a moment (a lease that lapsed mid-round) do no harm.

The operations the services need are here too (their SQL in
``sql/queries/maintenance.sql``); the leader lease's are in
:mod:`taskq.broker.ops.leader`, the scheduler's in
:mod:`taskq.broker.ops.schedules`.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Protocol

import anyio
import msgspec

from taskq import errors
from taskq.broker.ops import dependencies, plan, queries
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.leader import (
    LeaderRenewal,
    leader_attempt_elect,
    leader_lease_open,
    leader_resign,
)
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.ops.schedules import schedule_fire_due
from taskq.broker.stores.store import Consistency, Statement, Store

log = logging.getLogger("taskq.maintenance")

LEADER_LEASE = "maintenance"


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise errors.ConfigError(f"maintenance: {name} must be a positive number, got {value!r}")


# -- operations -------------------------------------------------------------------


class MaintenanceDue(msgspec.Struct, frozen=True):
    """Whether each maintenance service has anything to do now."""

    expired_leases: bool
    lost_workers: bool
    prunable_jobs: bool
    prunable_workers: bool


def maintenance_due(*, grace_seconds: float = 30.0, now: float | None = None) -> Op[MaintenanceDue]:
    """A cheap read that lets idle maintenance services skip their writes.

    Jobs are prunable past the store's retention (``ops/retention.py``).
    """
    rows = yield Read(
        Statement(
            queries.query("maintenance_due"),
            {"now": now, "grace_seconds": float(grace_seconds)},
        ),
        Consistency.NONE,
    )
    row = rows[0]
    return MaintenanceDue(
        expired_leases=bool(row["expired_leases"]),
        lost_workers=bool(row["lost_workers"]),
        prunable_jobs=bool(row["prunable_jobs"]),
        prunable_workers=bool(row["prunable_workers"]),
    )


class RequeueResult(msgspec.Struct, frozen=True):
    """Jobs whose lease expired, by the state they moved to."""

    requeued: tuple[int, ...]
    dead: tuple[int, ...]
    cancelled: tuple[int, ...]


def job_requeue_expired(*, now: float | None = None) -> Op[RequeueResult]:
    """Give back jobs whose lease ran out; the attempt counts, dead when attempts are spent."""
    results = yield Write(
        [
            clock_tick(now),
            Statement(queries.query("execution_expire")),
            Statement(queries.query("job_requeue_expired")),
            # A job that ends dead or cancelled here settles the jobs waiting on it.
            *dependencies.settle_statements(),
        ],
        idempotent=True,
    )
    moved: dict[str, list[int]] = {"queued": [], "dead": [], "cancelled": []}
    for row in results[2].rows:
        moved[row["state"]].append(int(row["id"]))
    return RequeueResult(
        requeued=tuple(sorted(moved["queued"])),
        dead=tuple(sorted(moved["dead"])),
        cancelled=tuple(sorted(moved["cancelled"])),
    )


def worker_mark_lost(*, grace_seconds: float, now: float | None = None) -> Op[list[str]]:
    """Mark workers lost whose last heartbeat is older than ``grace_seconds``."""
    results = yield Write(
        [
            clock_tick(now),
            Statement(queries.query("worker_mark_lost"), {"grace_seconds": float(grace_seconds)}),
        ],
        idempotent=True,
    )
    return sorted(str(row["id"]) for row in results[1].rows)


def job_prune(
    *, retention_seconds: float | None = None, limit: int = 10_000, now: float | None = None
) -> Op[int]:
    """Delete finished jobs (their attempts and output too) older than the retention; how many.

    The retention is ``retention_seconds`` for every finished job when given,
    else the store's, one for succeeded jobs and one for the rest
    (``ops/retention.py``). A job some child of which has not finished is
    kept (the child has yet to read its result), and a workflow goes with
    its last job.
    """
    kept = None if retention_seconds is None else float(retention_seconds)
    params = {"retention_seconds": kept, "limit": int(limit)}
    # The deletes name the same jobs: their attempts' output, their attempts,
    # their edges to their parents and their workflows if nothing else is
    # left of them, then them.
    prunable = queries.query("job_prunable")
    results = yield Write(
        [
            clock_tick(now),
            *(
                Statement(queries.query(name).format(job_prunable=prunable), params)
                for name in (
                    "output_prune",
                    "execution_prune",
                    "job_parents_prune",
                    "workflow_prune",
                    "job_prune",
                )
            ),
            Statement(queries.query("worker_prune"), {"retention_seconds": kept}),
            Statement(queries.query("schedule_fires_prune")),
        ],
        idempotent=True,
    )
    return len(results[5].rows)


# -- services ---------------------------------------------------------------------


class MaintenanceService(Protocol):
    """One periodic chore."""

    @property
    def name(self) -> str:
        """What logs call it."""
        ...

    @property
    def interval(self) -> float:
        """Seconds between two rounds."""
        ...

    def plan_once(self, *, now: float | None = None) -> Op[dict[str, int]]:
        """One round, as a plan; returns counts of what it did."""
        ...


class LeaseRequeuer(msgspec.Struct, frozen=True):
    """Gives jobs whose lease expired back to their queue (or ends them dead/cancelled)."""

    interval: float = 1.0
    name: str = "requeue_expired"

    def __post_init__(self) -> None:
        _positive("requeue interval", self.interval)

    def plan_once(self, *, now: float | None = None) -> Op[dict[str, int]]:
        due = yield from maintenance_due(now=now)
        if not due.expired_leases:
            return {"requeued": 0, "dead": 0, "cancelled": 0}
        moved = yield from job_requeue_expired(now=now)
        return {
            "requeued": len(moved.requeued),
            "dead": len(moved.dead),
            "cancelled": len(moved.cancelled),
        }


class LostWorkerMarker(msgspec.Struct, frozen=True):
    """Marks workers lost whose heartbeat is older than ``grace_seconds``."""

    grace_seconds: float = 30.0
    interval: float = 5.0
    name: str = "mark_lost_workers"

    def __post_init__(self) -> None:
        _positive("lost-worker grace", self.grace_seconds)
        _positive("lost-worker interval", self.interval)

    def plan_once(self, *, now: float | None = None) -> Op[dict[str, int]]:
        due = yield from maintenance_due(grace_seconds=self.grace_seconds, now=now)
        if not due.lost_workers:
            return {"lost": 0}
        lost = yield from worker_mark_lost(grace_seconds=self.grace_seconds, now=now)
        return {"lost": len(lost)}


class Pruner(msgspec.Struct, frozen=True):
    """Deletes finished jobs, their attempts and gone workers past the retention.

    ``retention_seconds``: one retention for every finished job (a prune by
    hand); None, the store's own (``ops/retention.py``), as maintenance prunes.
    """

    retention_seconds: float | None = None
    batch: int = 10_000
    interval: float = 60.0
    name: str = "prune"
    most_batches: int = 10
    """Batches in one turn, each its own write, while they come back full: a store that
    ends more jobs a minute than one batch holds is still kept to its retention."""

    def __post_init__(self) -> None:
        if self.retention_seconds is not None:
            _positive("prune retention", self.retention_seconds)
        _positive("prune interval", self.interval)
        _positive("prune batch", self.batch)
        _positive("prune batches", self.most_batches)

    def plan_once(self, *, now: float | None = None) -> Op[dict[str, int]]:
        if self.retention_seconds is None:
            due = yield from maintenance_due(now=now)
            if not due.prunable_jobs and not due.prunable_workers:
                return {"pruned": 0}
        pruned = 0
        for _ in range(self.most_batches):
            batch = yield from job_prune(
                retention_seconds=self.retention_seconds, limit=self.batch, now=now
            )
            pruned += batch
            if batch < self.batch:
                break
        return {"pruned": pruned}


class Scheduler(msgspec.Struct, frozen=True):
    """Enqueues the due tick of every periodic job (each tick once, whoever runs it)."""

    interval: float = 1.0
    name: str = "schedules"

    def __post_init__(self) -> None:
        _positive("scheduler interval", self.interval)

    def plan_once(self, *, now: float | None = None) -> Op[dict[str, int]]:
        fired = yield from schedule_fire_due(now=now)
        return {"fired": len(fired)}


def default_services() -> list[MaintenanceService]:
    return [LeaseRequeuer(), Scheduler(), LostWorkerMarker(), Pruner()]


def run_once(
    store: Store, service: MaintenanceService, *, now: float | None = None
) -> dict[str, int]:
    """Run one round of ``service`` now, whoever leads (for tests and `taskq prune`)."""
    return plan.run(store, service.plan_once(now=now))


class Maintainer(msgspec.Struct):
    """Runs the services on a tick while this process holds the leader lease.

    With ``renewed_by_heartbeat`` a worker's heartbeat renews the lease in its
    own write (see ``heartbeat_renewal``), and the tick renews it only if the
    heartbeats fall behind, at two thirds of the lease gone: an idle leader
    then writes nothing but its heartbeats. The lease must then outlast two
    heartbeat intervals.

    After ticks failed for ``long_outage_seconds`` or more (the store away),
    expired leases are requeued only ``after_outage_seconds`` after the store
    answers again: the leases of every job that ran through the outage may
    have expired meanwhile, and the workers that held them, cut off as this
    one was, get that long to renew them and send the results they kept
    (``AckBatcher``). Requeued at once, a job that had finished would run
    again, and one on its last attempt end ``dead``. A shorter outage (a
    leader's election, a busy moment) cannot outlast a live worker's lease,
    and holds nothing back.
    """

    store: Store
    holder: str
    services: list[MaintenanceService] = msgspec.field(default_factory=default_services)
    tick_seconds: float = 1.0
    lease_seconds: float = 10.0
    renewed_by_heartbeat: bool = False
    after_outage_seconds: float = 0.0
    long_outage_seconds: float = 0.0
    is_leader: bool = False
    _last_run: dict[str, float] = msgspec.field(default_factory=dict)
    _elected_at: float = float("-inf")
    _outage_ended_at: float = float("-inf")  # time.monotonic(), as the tick's ``started``

    def __post_init__(self) -> None:
        _positive("tick", self.tick_seconds)
        if self.lease_seconds <= 2 * self.tick_seconds:
            raise errors.ConfigError(
                "maintenance: the leader lease must outlast two ticks, "
                f"got lease {self.lease_seconds}s for tick {self.tick_seconds}s"
            )

    def plan_tick(self, *, now: float | None = None) -> Op[dict[str, dict[str, int]]]:
        """Keep or take the lease; run the services that are due if we lead.

        A leader renews its lease once a third of it is gone (two thirds when
        heartbeats renew it), not every tick, so an idle cluster sees few
        writes; the lease outlasts two ticks, so a renewal is never late.
        """
        started = time.monotonic()
        # Measured on the tick's own clock: the injected one in tests.
        tick_time = started if now is None else now
        renew_after = self.lease_seconds * (2 / 3 if self.renewed_by_heartbeat else 1 / 3)
        if self.is_leader and tick_time - self._elected_at < renew_after:
            pass  # the lease is fresh: nothing to renew
        elif self.is_leader or (yield from leader_lease_open(LEADER_LEASE, self.holder, now=now)):
            # A follower reads first and tries only once the lease is free or
            # lapsed, so followers write nothing while a leader is alive.
            self.is_leader = yield from leader_attempt_elect(
                LEADER_LEASE, self.holder, ttl_seconds=self.lease_seconds, now=now
            )
            self._elected_at = tick_time
        if not self.is_leader:
            return {}
        done: dict[str, dict[str, int]] = {}
        for service in self.services:
            last = self._last_run.get(service.name)
            if last is not None and started - last < service.interval:
                continue
            if (
                isinstance(service, LeaseRequeuer)
                and started - self._outage_ended_at < self.after_outage_seconds
            ):
                continue
            self._last_run[service.name] = started
            done[service.name] = yield from service.plan_once(now=now)
        return done

    def heartbeat_renewal(self) -> LeaderRenewal | None:
        """The lease for the next heartbeat to renew: ours, if we lead."""
        if not (self.renewed_by_heartbeat and self.is_leader):
            return None
        return LeaderRenewal(LEADER_LEASE, self.lease_seconds)

    def heartbeat_renewed(self, held: bool, *, sent_at: float) -> None:
        """Take in a heartbeat's renewal, sent at ``sent_at`` (``time.monotonic``)."""
        self.is_leader = held
        if held:
            self._elected_at = max(self._elected_at, sent_at)

    async def run_forever(self, *, stop: anyio.Event | None = None) -> None:
        """Tick until ``stop`` is set; a failed tick is logged and the loop goes on."""
        stop = stop or anyio.Event()
        failing: type[errors.StoreError] | None = None
        failing_since = 0.0
        while not stop.is_set():
            try:
                done = await plan.run_async(self.store, self.plan_tick())
            except errors.StoreError as exc:
                # Once per outage (and per kind of failure), not once a tick.
                if type(exc) is not failing:
                    log.warning("maintenance tick failed, will retry: %s", exc)
                if failing is None:
                    failing_since = time.monotonic()
                failing = type(exc)
            else:
                if failing is not None:
                    log.info("maintenance ticks again")
                    if time.monotonic() - failing_since >= self.long_outage_seconds:
                        self._outage_ended_at = time.monotonic()
                failing = None
                for name, counts in done.items():
                    if any(counts.values()):
                        log.info("maintenance %s: %s", name, counts)
            with anyio.move_on_after(self.tick_seconds):
                await stop.wait()
        if self.is_leader:
            try:
                await plan.run_async(self.store, leader_resign(LEADER_LEASE, self.holder))
            except errors.StoreError as exc:
                log.warning("could not resign the maintenance lease: %s", exc)
