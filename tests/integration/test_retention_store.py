"""The store's retention on both stores: set, read, refused, and what maintenance prunes by it.

The retention is one row for the whole store and the rqlite cluster is
shared, so each test puts back what it found. Jobs live in a queue of the
test's own; times are injected.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.maintenance import Pruner, maintenance_due, run_once
from taskq.broker.ops.plan import Op
from taskq.broker.ops.retention import retention_get, retention_set
from taskq.broker.ops.workers import worker_list, worker_register, worker_set_state
from taskq.broker.records import Fenced, Retention
from taskq.broker.stores.store import Store
from tests.support.reports import completed, failed, report_one

T = TypeVar("T")
T0 = 1_800_000_000.0
DAY = 86400.0
BOOM = {"type": "Boom", "message": "on purpose"}

Run = Callable[[Op[Any]], Any]


@pytest.fixture
def run(store: Store) -> Iterator[Run]:
    def carry_out(op: Op[T]) -> T:
        return plan.run(store, op)

    found = carry_out(retention_get())
    yield carry_out
    carry_out(
        retention_set(
            succeeded_seconds=found.succeeded_seconds, failed_seconds=found.failed_seconds
        )
    )


@pytest.fixture
def queue() -> str:
    return f"ret-{uuid.uuid4().hex[:10]}"


def _ended(run: Run, queue: str, *, succeeded: bool, at: float) -> int:
    """A job of ``queue`` that ended at ``at``: succeeded, or failed for good."""
    [job_id] = run(job_enqueue([call_spec("tests.support.jobs:echo", [1], queue=queue)], now=at))
    [job] = run(job_claim("w-ret", [queue], limit=1, lease_seconds=30, now=at))
    report = completed(job.lease, 1) if succeeded else failed(job.lease, BOOM, retryable=False)
    assert run(report_one(report, now=at)) is Fenced.ACCEPTED
    return job_id


def _kept(run: Run, job_id: int) -> bool:
    return run(job_get(job_id)) is not None


def test_a_store_keeps_finished_jobs_seven_days_until_told_otherwise(run: Run) -> None:
    # Each test puts back what it found: the shared cluster holds the default too.
    assert run(retention_get()) == Retention(7 * DAY, 7 * DAY)


def test_maintenance_prunes_succeeded_and_failed_jobs_each_by_its_own_retention(
    run: Run, store: Store, queue: str
) -> None:
    assert run(retention_set(succeeded_seconds=DAY, failed_seconds=30 * DAY)) == Retention(
        DAY, 30 * DAY
    )
    assert run(retention_set(failed_seconds=90 * DAY)) == Retention(DAY, 90 * DAY)
    success = _ended(run, queue, succeeded=True, at=T0)
    failure = _ended(run, queue, succeeded=False, at=T0)

    run(Pruner().plan_once(now=T0 + 2 * DAY))
    assert (_kept(run, success), _kept(run, failure)) == (False, True)
    if store.url.startswith("sqlite"):
        # Nothing more is due until the failure's 90 days are up: idle rounds write
        # nothing. (The shared cluster holds other tests' jobs, due by then.)
        assert not run(maintenance_due(now=T0 + 89 * DAY)).prunable_jobs
    run(Pruner().plan_once(now=T0 + 89 * DAY))
    assert _kept(run, failure)
    assert run(maintenance_due(now=T0 + 91 * DAY)).prunable_jobs
    run(Pruner().plan_once(now=T0 + 91 * DAY))
    assert not _kept(run, failure)


def test_never_keeps_a_kind_from_maintenance_but_not_from_a_prune_by_hand(
    run: Run, queue: str
) -> None:
    run(retention_set(succeeded_seconds=DAY, failed_seconds=None))
    failure = _ended(run, queue, succeeded=False, at=T0)
    run(Pruner().plan_once(now=T0 + 3650 * DAY))
    assert _kept(run, failure)
    assert run_once_by_hand(run, older_than=DAY, now=T0 + 2 * DAY) >= 1
    assert not _kept(run, failure)


def test_one_turn_of_the_pruner_goes_on_while_its_batches_come_back_full(
    run: Run, queue: str
) -> None:
    # More ended jobs than a batch holds: a store ending jobs faster than one batch a
    # minute is still kept to its retention.
    ended = [_ended(run, queue, succeeded=True, at=T0) for _ in range(25)]
    pruner = Pruner(retention_seconds=DAY, batch=10, most_batches=1000)
    assert run(pruner.plan_once(now=T0 + 2 * DAY))["pruned"] >= 25
    assert [job_id for job_id in ended if _kept(run, job_id)] == []


def run_once_by_hand(run: Run, *, older_than: float, now: float) -> int:
    pruned: int = run(Pruner(retention_seconds=older_than).plan_once(now=now))["pruned"]
    return pruned


def test_gone_workers_are_kept_as_long_as_the_longer_retention(run: Run, queue: str) -> None:
    worker = f"w-{queue}"
    run(
        worker_register(
            worker, name=worker, host="lab", pid=1, queues=[queue], labels=[], slots=1, now=T0
        )
    )
    run(worker_set_state(worker, "stopped", now=T0))

    def listed() -> bool:
        return worker in {info.id for info in run(worker_list())}

    run(retention_set(succeeded_seconds=DAY, failed_seconds=None))
    run(Pruner().plan_once(now=T0 + 3650 * DAY))
    assert listed()
    run(retention_set(failed_seconds=10 * DAY))
    run(Pruner().plan_once(now=T0 + 5 * DAY))
    assert listed()
    # Pruned on its own: no job is left to prune beside it.
    assert run(maintenance_due(now=T0 + 11 * DAY)).prunable_workers
    run(Pruner().plan_once(now=T0 + 11 * DAY))
    assert not listed()


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "7d", True])
def test_a_retention_that_is_not_positive_seconds_is_refused_and_nothing_changes(
    run: Run, bad: Any
) -> None:
    before = run(retention_set(succeeded_seconds=2 * DAY, failed_seconds=3 * DAY))
    with pytest.raises(errors.ConfigError, match="failed jobs' retention must be a positive"):
        run(retention_set(succeeded_seconds=DAY, failed_seconds=bad))
    assert run(retention_get()) == before


def test_run_once_prunes_by_the_stored_retention(run: Run, store: Store, queue: str) -> None:
    run(retention_set(succeeded_seconds=DAY, failed_seconds=DAY))
    success = _ended(run, queue, succeeded=True, at=T0)
    run_once(store, Pruner(), now=T0 + DAY / 2)
    assert _kept(run, success)
    assert run_once(store, Pruner(), now=T0 + 2 * DAY)["pruned"] >= 1
    assert not _kept(run, success)
