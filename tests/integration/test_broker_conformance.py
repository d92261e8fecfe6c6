"""Every broker operation, run unchanged on the SQLite file and a real 3-node rqlite cluster.

Time is injected (``now=``) so leases expire and backoffs elapse without
sleeping. Each test works in a queue of its own, so tests can share a cluster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pytest

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_backlog, job_claim, job_claimable
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat, job_progress
from taskq.broker.ops.jobs import (
    execution_list,
    execution_throughput,
    job_cancel,
    job_get,
    job_list,
    job_retry,
)
from taskq.broker.ops.leader import LeaderRenewal, leader_attempt_elect, leader_resign
from taskq.broker.ops.leases import Backoff, Report, ReportKind, job_report
from taskq.broker.ops.maintenance import job_prune, job_requeue_expired, worker_mark_lost
from taskq.broker.ops.output import AttemptOutput, OutputChunk
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import (
    job_counts,
    queue_set_limits,
    queue_set_paused,
    submit_limit_remove,
    submit_limit_set,
)
from taskq.broker.ops.schedules import (
    schedule_add,
    schedule_fire_due,
    schedule_list,
    schedule_remove,
    schedule_set_paused,
)
from taskq.broker.ops.workers import worker_list, worker_register, worker_set_state
from taskq.broker.records import AttemptReport, Fenced, JobState, Lease, WorkflowSubmission
from taskq.broker.stores.store import Consistency, Statement, Store
from tests.support.reports import completed, failed, released, report_one

T = TypeVar("T")
T0 = 1_800_000_000.0  # an injected store time, far from the real clock
LEASE = 30.0


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def run(store: Store) -> Callable[[Op[Any]], Any]:
    def carry_out(op: Op[T]) -> T:
        return plan.run(store, op)

    return carry_out


def _enqueue(
    run: Callable[[Op[Any]], Any], queue: str, count: int = 1, **options: Any
) -> list[int]:
    specs = [
        call_spec("tests.support.jobs:echo", [i], queue=queue, **options) for i in range(count)
    ]
    ids: list[int] = run(job_enqueue(specs, now=T0))
    return ids


def _claim(
    run: Callable[[Op[Any]], Any],
    queue: str,
    worker: str = "w1",
    limit: int = 10,
    now: float = T0,
    labels: tuple[str, ...] = (),
) -> list[Any]:
    claimed: list[Any] = run(
        job_claim(worker, [queue], limit=limit, lease_seconds=LEASE, labels=labels, now=now)
    )
    return claimed


# -- enqueue ------------------------------------------------------------------------


def test_enqueue_returns_ids_in_order_and_stores_the_job(run: Any, queue: str) -> None:
    ids = _enqueue(
        run, queue, 3, priority=2, max_attempts=5, timeout=9.5, limits={"memory_bytes": "64MiB"}
    )
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    job = run(job_get(ids[1]))
    assert job.state is JobState.QUEUED
    assert job.payload == {"target": "tests.support.jobs:echo", "args": [1], "kwargs": {}}
    assert (job.priority, job.max_attempts, job.timeout, job.limits) == (
        2,
        5,
        9.5,
        {"memory_bytes": "64MiB"},
    )
    assert job.run_at == pytest.approx(T0, abs=0.1)
    assert job.created_at == pytest.approx(T0, abs=0.1)


def test_an_idempotency_key_returns_the_existing_job(run: Any, queue: str) -> None:
    key = f"report-{queue}"
    first = _enqueue(run, queue, idempotency_key=key)
    again = _enqueue(run, queue, idempotency_key=key)
    both = run(
        job_enqueue(
            [
                call_spec("tests.support.jobs:echo", [0], queue=queue, idempotency_key=key),
                call_spec("m:f", queue=queue, idempotency_key=key + "-other"),
            ],
            now=T0,
        )
    )
    assert again == first
    assert both[0] == first[0]
    assert both[1] != first[0]
    assert len(run(job_list(queue=queue))) == 2


def test_bulk_enqueue_is_one_request(run: Any, store: Store, queue: str) -> None:
    specs = [call_spec("m:f", [i], queue=queue) for i in range(500)]
    ids = run(job_enqueue(specs, now=T0))
    assert len(set(ids)) == 500
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert stats.counts[JobState.QUEUED] == 500


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        (lambda q: call_spec("m:f", [object()], queue=q), "must be JSON"),
        (lambda q: call_spec("m:f", [float("nan")], queue=q), "must be JSON"),
        (lambda q: call_spec("not a target", queue=q), r"package\.module:function"),
        (lambda q: call_spec("m:f", queue=q, max_attempts=0), "max_attempts"),
        (lambda q: call_spec("m:f", queue=q, delay=-1), "delay"),
        (lambda q: call_spec("m:f", queue=q, timeout=0), "timeout"),
        (lambda q: call_spec("m:f", queue=q, limits={"memory_mb": 5}), "unknown limit"),
        (lambda q: call_spec("m:f", queue=q, limits={"memory_bytes": "lots"}), "not a size"),
    ],
)
def test_bad_jobs_are_refused_and_nothing_is_written(
    run: Any, queue: str, spec: Callable[[str], Any], complaint: str
) -> None:
    good = call_spec("m:f", queue=queue)
    with pytest.raises(errors.InvalidJob, match=complaint):
        run(job_enqueue([good, spec(queue)]))
    assert run(job_list(queue=queue)) == []


# -- claim ----------------------------------------------------------------------------


def test_claim_order_is_priority_then_run_at_then_id(run: Any, queue: str) -> None:
    def enqueue(priority: int, delay: float) -> int:
        spec = call_spec("m:f", queue=queue, priority=priority, delay=delay)
        [job_id] = run(job_enqueue([spec], now=T0))
        return int(job_id)

    a = enqueue(0, 0)
    b = enqueue(5, 10)
    c = enqueue(5, 0)
    d = enqueue(0, 0)
    order = [_claim(run, queue, limit=1, now=T0 + 20)[0].lease.job_id for _ in range(4)]
    assert order == [c, b, a, d]
    assert _claim(run, queue, now=T0 + 20) == []


def test_claim_takes_the_best_jobs_first(run: Any, queue: str) -> None:
    low = _enqueue(run, queue, 3, priority=0)
    high = _enqueue(run, queue, 2, priority=5)
    assert {job.lease.job_id for job in _claim(run, queue, limit=2)} == set(high)
    assert [job.lease.job_id for job in _claim(run, queue, limit=1)] == [low[0]]


def test_claim_sets_a_lease_an_attempt_and_an_execution(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue, worker="w7", now=T0 + 1)
    assert claimed.lease.job_id == job_id
    assert claimed.attempt == 1
    assert claimed.lease_until == pytest.approx(T0 + 1 + LEASE, abs=0.1)
    assert claimed.payload["args"] == [0]
    job = run(job_get(job_id))
    assert (job.state, job.worker_id, job.attempts) == (JobState.RUNNING, "w7", 1)
    [execution] = run(execution_list(job_id=job_id))
    assert (execution.worker_id, execution.attempt, execution.finished_at) == ("w7", 1, None)


def test_each_claim_gets_a_new_token(run: Any, queue: str) -> None:
    _enqueue(run, queue)
    [first] = _claim(run, queue)
    assert run(report_one(released(first.lease), now=T0)) is Fenced.ACCEPTED
    [second] = _claim(run, queue)
    assert second.lease.job_id == first.lease.job_id
    assert second.lease.token != first.lease.token


def test_future_jobs_wait_for_their_time(run: Any, queue: str) -> None:
    run(job_enqueue([call_spec("m:f", queue=queue, delay=60)], now=T0))
    assert _claim(run, queue, now=T0 + 59) == []
    assert len(_claim(run, queue, now=T0 + 61)) == 1


def test_claims_skip_paused_queues_and_resume(run: Any, queue: str) -> None:
    _enqueue(run, queue, 2)
    run(queue_set_paused(queue, True, now=T0))
    assert _claim(run, queue) == []
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert stats.paused
    run(queue_set_paused(queue, False, now=T0))
    assert len(_claim(run, queue)) == 2


def test_jobs_needing_labels_go_only_to_workers_that_have_them(run: Any, queue: str) -> None:
    [gpu_job] = _enqueue(run, queue, labels=("gpu",))
    [plain_job] = _enqueue(run, queue)
    assert [job.lease.job_id for job in _claim(run, queue, labels=("highmem",))] == [plain_job]
    assert [job.lease.job_id for job in _claim(run, queue, labels=("gpu", "highmem"))] == [gpu_job]


def test_claim_across_queues_respects_priority(run: Any, queue: str) -> None:
    other = queue + "-b"
    [low] = _enqueue(run, queue, priority=1)
    [high] = _enqueue(run, other, priority=9)
    claimed = run(job_claim("w", [queue, other], limit=1, lease_seconds=LEASE, now=T0))
    assert [job.lease.job_id for job in claimed] == [high]
    assert low != high


# -- heartbeat, complete, fail, release ------------------------------------------------


def test_heartbeat_extends_leases_from_the_store_clock(run: Any, queue: str) -> None:
    _enqueue(run, queue, 2)
    claimed = _claim(run, queue)
    beat = run(
        job_heartbeat("w1", [job.lease for job in claimed], lease_seconds=LEASE, now=T0 + 20)
    )
    assert beat.kept == {job.lease for job in claimed}
    assert not beat.lost
    # Past the first lease but inside the extended one: nothing expires.
    mine = {job.lease.job_id for job in claimed}
    assert not mine & set(run(job_requeue_expired(now=T0 + LEASE + 5)).requeued)
    expired = run(job_requeue_expired(now=T0 + 20 + LEASE + 1))
    assert mine <= set(expired.requeued)


def test_a_heartbeat_names_the_leases_lost_to_a_cancel_and_leaves_them_as_they_were(
    run: Any, queue: str
) -> None:
    _enqueue(run, queue, 2)
    claimed = _claim(run, queue)
    cancelled, kept = claimed[0], claimed[1]
    run(job_cancel([cancelled.lease.job_id], now=T0 + 1))
    lease_before = run(job_get(cancelled.lease.job_id)).lease_until
    beat = run(
        job_heartbeat("w1", [job.lease for job in claimed], lease_seconds=LEASE, now=T0 + 20)
    )
    assert (beat.kept, beat.lost) == ({kept.lease}, {cancelled.lease})
    assert beat.cancelled == {cancelled.lease}
    # Not renewed: the worker stops it, and the lease ends as it would have.
    assert run(job_get(cancelled.lease.job_id)).lease_until == lease_before


def test_complete_stores_the_result_and_the_attempt(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue)
    report = AttemptReport("succeeded", exit_code=0, peak_rss_bytes=1234, cpu_seconds=0.5)
    output = AttemptOutput(claimed.lease, (OutputChunk(0, 4, "done"),), keep_bytes=1000)
    with_output = msgspec.structs.replace(
        completed(claimed.lease, {"words": 2}, report), output=output
    )
    assert run(report_one(with_output, now=T0 + 3)) is Fenced.ACCEPTED
    job = run(job_get(job_id))
    assert (job.state, job.result, job.finished_at) == (
        JobState.SUCCEEDED,
        {"words": 2},
        pytest.approx(T0 + 3, abs=0.1),
    )
    [execution] = run(execution_list(job_id=job_id))
    assert (
        execution.outcome,
        execution.peak_rss_bytes,
        execution.cpu_seconds,
        execution.log_tail,
    ) == ("succeeded", 1234, 0.5, "done")


def test_a_stale_token_changes_nothing(run: Any, store: Store, queue: str) -> None:
    [job_id] = _enqueue(run, queue, max_attempts=3)
    [first] = _claim(run, queue, worker="zombie")
    run(job_requeue_expired(now=T0 + LEASE + 1))
    [second] = _claim(run, queue, worker="w2", now=T0 + LEASE + 2)
    before = store.query(
        Statement("SELECT * FROM jobs WHERE id = :id", {"id": job_id}),
        consistency=Consistency.LINEARIZABLE,
    )
    stale = first.lease
    assert run(report_one(completed(stale, "zombie result"), now=T0 + 40)) is Fenced.LEASE_LOST
    assert (
        run(report_one(failed(stale, {"type": "X", "message": "m"}), now=T0 + 40))
        is Fenced.LEASE_LOST
    )
    assert run(report_one(released(stale), now=T0 + 40)) is Fenced.LEASE_LOST
    assert run(job_progress(stale, 0.5)) is Fenced.LEASE_LOST
    forged = Lease(job_id=job_id, token="forged")
    assert run(report_one(completed(forged, "forged"), now=T0 + 40)) is Fenced.LEASE_LOST
    after = store.query(
        Statement("SELECT * FROM jobs WHERE id = :id", {"id": job_id}),
        consistency=Consistency.LINEARIZABLE,
    )
    assert after == before
    assert run(report_one(completed(second.lease, "real result"), now=T0 + 41)) is Fenced.ACCEPTED


def test_fail_retries_with_exponential_backoff_then_dead(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue, max_attempts=3)
    backoff = Backoff(base=10.0, cap=1000.0, jitter=0.0)
    now = T0
    for attempt, expected_delay in ((1, 10.0), (2, 20.0)):
        [claimed] = _claim(run, queue, now=now)
        assert claimed.attempt == attempt
        error = {"type": "ValueError", "message": f"bad {attempt}"}
        assert (
            run(report_one(failed(claimed.lease, error), backoff=backoff, now=now))
            is Fenced.ACCEPTED
        )
        job = run(job_get(job_id))
        assert job.state is JobState.QUEUED
        assert job.run_at == pytest.approx(now + expected_delay, abs=0.1)
        assert _claim(run, queue, now=now + expected_delay - 1) == []
        now += expected_delay + 1
    [claimed] = _claim(run, queue, now=now)
    run(report_one(failed(claimed.lease, {"type": "ValueError", "message": "bad 3"}), now=now))
    job = run(job_get(job_id))
    assert (job.state, job.attempts, job.error["message"]) == (JobState.DEAD, 3, "bad 3")
    assert [e.outcome for e in run(execution_list(job_id=job_id))] == ["error"] * 3


def test_jitter_spreads_retries(run: Any, queue: str) -> None:
    ids = _enqueue(run, queue, 6, max_attempts=2)
    for claimed in _claim(run, queue):
        run(
            report_one(
                failed(claimed.lease, {"type": "E", "message": ""}),
                backoff=Backoff(base=100, jitter=0.5),
                now=T0,
            )
        )
    run_ats = {round(run(job_get(i)).run_at, 1) for i in ids}
    assert all(T0 + 49 <= at <= T0 + 151 for at in run_ats)
    assert len(run_ats) > 1


def test_a_non_retryable_error_fails_at_once(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue, max_attempts=5)
    [claimed] = _claim(run, queue)
    run(
        report_one(
            failed(claimed.lease, {"type": "Disabled", "message": "shell is off"}, retryable=False),
            now=T0,
        )
    )
    assert run(job_get(job_id)).state is JobState.FAILED


def test_release_gives_the_job_back_without_burning_an_attempt(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue, max_attempts=1)
    [claimed] = _claim(run, queue)
    assert run(report_one(released(claimed.lease), now=T0)) is Fenced.ACCEPTED
    job = run(job_get(job_id))
    assert (job.state, job.attempts) == (JobState.QUEUED, 0)
    [again] = _claim(run, queue)
    assert again.attempt == 1
    outcomes = [e.outcome for e in run(execution_list(job_id=job_id))]
    assert outcomes == ["released", None]


def test_progress_is_recorded(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue)
    assert run(job_progress(claimed.lease, 0.25, "a quarter")) is Fenced.ACCEPTED
    job = run(job_get(job_id))
    assert (job.progress, job.progress_message) == (0.25, "a quarter")
    with pytest.raises(errors.InvalidJob):
        run(job_progress(claimed.lease, 1.5))


def test_a_result_that_is_not_json_is_refused_before_writing(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue)
    with pytest.raises(errors.InvalidJob):
        run(report_one(completed(claimed.lease, {1, 2})))
    assert run(job_get(job_id)).state is JobState.RUNNING


# -- cancel and retry -------------------------------------------------------------------


def test_a_running_job_cancelled_that_fails_before_it_hears_ends_cancelled_not_retried(
    run: Any, queue: str
) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue)
    assert run(job_cancel([job_id], now=T0 + 1)).requested == (job_id,)
    # It fails on its own, with attempts left, before a heartbeat tells its worker.
    error = {"type": "ValueError", "message": "bad input"}
    assert run(report_one(failed(claimed.lease, error), now=T0 + 2)) is Fenced.ACCEPTED
    job = run(job_get(job_id))
    assert (job.state, job.attempts) == (JobState.CANCELLED, 1), job
    assert job.finished_at is not None
    # Queued again, its claim would have forgotten the cancel and run it.
    assert not run(job_claim("w2", [queue], limit=1, lease_seconds=LEASE, now=T0 + 600))


def test_a_running_job_cancelled_that_completes_before_it_hears_spawns_nothing(
    run: Any, queue: str
) -> None:
    [job_id] = _enqueue(run, queue)
    [claimed] = _claim(run, queue)
    # Its workflow, or the job alone, is cancelled while it runs; it ends before it hears.
    assert run(job_cancel([job_id], now=T0 + 1)).requested == (job_id,)
    spawn = WorkflowSubmission(
        jobs=(call_spec("tests.support.jobs:echo", [1], queue=queue),), parents=((),)
    )
    report = msgspec.structs.replace(completed(claimed.lease, "done"), spawn=spawn)
    assert run(report_one(report, now=T0 + 2)) is Fenced.ACCEPTED
    job = run(job_get(job_id))
    assert (job.state, job.result) == (JobState.SUCCEEDED, "done")
    # Spawned, new jobs would have run after the cancel: none was written.
    assert [listed.id for listed in run(job_list(queue=queue))] == [job_id]
    assert job.workflow_id is None


def test_cancel_queued_at_once_and_running_at_the_next_heartbeat(run: Any, queue: str) -> None:
    queued, running = _enqueue(run, queue, 2)
    [claimed] = _claim(run, queue, limit=1)
    assert claimed.lease.job_id == queued
    queued, running = running, queued
    result = run(job_cancel([queued, running, 999_999_999], now=T0))
    assert (result.cancelled, result.requested) == ((queued,), (running,))
    assert run(job_get(queued)).state is JobState.CANCELLED
    beat = run(job_heartbeat("w1", [claimed.lease], lease_seconds=LEASE, now=T0 + 1))
    assert beat.lost == {claimed.lease}
    assert (
        run(report_one(released(claimed.lease, AttemptReport("cancelled")), now=T0 + 2))
        is Fenced.ACCEPTED
    )
    job = run(job_get(running))
    assert (job.state, job.attempts) == (JobState.CANCELLED, 1)


def test_a_cancelled_job_whose_worker_died_ends_cancelled(run: Any, queue: str) -> None:
    [job_id] = _enqueue(run, queue)
    _claim(run, queue)
    run(job_cancel([job_id], now=T0))
    assert job_id in run(job_requeue_expired(now=T0 + LEASE + 1)).cancelled
    assert run(job_get(job_id)).state is JobState.CANCELLED


def test_retry_by_hand(run: Any, queue: str) -> None:
    dead, cancelled, fresh = _enqueue(run, queue, 3, max_attempts=1)
    [claimed] = _claim(run, queue, limit=1)
    run(report_one(failed(claimed.lease, {"type": "E", "message": "x"}), now=T0))
    run(job_cancel([cancelled], now=T0))
    assert run(job_retry([dead, cancelled, fresh], now=T0 + 5)) == sorted([dead, cancelled])
    job = run(job_get(dead))
    assert (job.state, job.max_attempts, job.run_at) == (
        JobState.QUEUED,
        2,
        pytest.approx(T0 + 5, abs=0.1),
    )
    assert len(_claim(run, queue, now=T0 + 5)) == 3


# -- maintenance ----------------------------------------------------------------------


def test_requeue_counts_the_attempt_and_kills_spent_jobs(run: Any, queue: str) -> None:
    again, spent = _enqueue(run, queue, 1, max_attempts=2) + _enqueue(run, queue, 1, max_attempts=1)
    _claim(run, queue)
    early = run(job_requeue_expired(now=T0 + LEASE - 1))
    assert not {again, spent} & {*early.requeued, *early.dead}
    result = run(job_requeue_expired(now=T0 + LEASE + 1))
    assert again in result.requeued
    assert spent in result.dead
    job = run(job_get(again))
    assert (job.state, job.attempts, job.error["type"]) == (JobState.QUEUED, 1, "LeaseExpired")
    assert [e.outcome for e in run(execution_list(job_id=spent))] == ["lease_expired"]


def test_workers_register_heartbeat_and_are_marked_lost(run: Any, queue: str) -> None:
    worker = f"worker-{queue}"
    run(
        worker_register(
            worker,
            name="lab-1",
            host="lab-1",
            pid=42,
            queues=[queue],
            labels=["gpu"],
            slots=4,
            now=T0,
        )
    )
    run(job_heartbeat(worker, [], lease_seconds=LEASE, now=T0 + 10))
    [info] = [w for w in run(worker_list()) if w.id == worker]
    assert info.running == 0
    assert worker not in run(worker_mark_lost(grace_seconds=30, now=T0 + 35))
    assert worker in run(worker_mark_lost(grace_seconds=30, now=T0 + 41))
    [info] = [w for w in run(worker_list()) if w.id == worker]
    assert (info.state, info.slots, info.labels, info.queues) == ("lost", 4, ("gpu",), (queue,))
    run(job_heartbeat(worker, [], lease_seconds=LEASE, now=T0 + 50))
    [info] = [w for w in run(worker_list()) if w.id == worker]
    assert info.state == "active"
    run(worker_set_state(worker, "stopped", now=T0 + 60))
    [info] = [w for w in run(worker_list()) if w.id == worker]
    assert info.state == "stopped"


def test_a_heartbeat_counts_busy_slots_not_jobs_claimed_ahead(run: Any, queue: str) -> None:
    worker = f"worker-{queue}"
    run(
        worker_register(
            worker, name="lab-2", host="lab-2", pid=43, queues=[queue], labels=[], slots=1, now=T0
        )
    )
    _enqueue(run, queue, 3)
    leases = [job.lease for job in _claim(run, queue, worker=worker)]

    def running_after(**busy: int) -> int:
        run(job_heartbeat(worker, leases, lease_seconds=LEASE, now=T0 + 5, **busy))
        [info] = [w for w in run(worker_list()) if w.id == worker]
        return info.running

    assert running_after() == 3
    assert running_after(busy=1) == 1


def test_prune_deletes_old_finished_jobs_and_their_attempts(
    run: Any, store: Store, queue: str
) -> None:
    old, recent, waiting = _enqueue(run, queue, 3)
    claimed = _claim(run, queue, limit=2)
    run(report_one(completed(claimed[0].lease, 1), now=T0))
    run(report_one(completed(claimed[1].lease, 2), now=T0 + 3000))
    pruned = run(job_prune(retention_seconds=3600, now=T0 + 4000))
    assert pruned >= 1
    remaining = {job.id for job in run(job_list(queue=queue))}
    assert remaining == {recent, waiting}
    rows = store.query(
        Statement("SELECT count(*) AS n FROM executions WHERE job_id = :id", {"id": old}),
        consistency=Consistency.LINEARIZABLE,
    )
    assert rows[0]["n"] == 0
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert stats.counts[JobState.SUCCEEDED] == 1
    assert stats.counts[JobState.QUEUED] == 1


def test_one_leader_at_a_time(run: Any, queue: str) -> None:
    name = f"maintenance-{queue}"
    assert run(leader_attempt_elect(name, "a", ttl_seconds=10, now=T0))
    assert not run(leader_attempt_elect(name, "b", ttl_seconds=10, now=T0 + 5))
    assert run(leader_attempt_elect(name, "a", ttl_seconds=10, now=T0 + 8))
    assert not run(leader_attempt_elect(name, "b", ttl_seconds=10, now=T0 + 17))
    assert run(leader_attempt_elect(name, "b", ttl_seconds=10, now=T0 + 19))
    run(leader_resign(name, "b"))
    assert run(leader_attempt_elect(name, "a", ttl_seconds=10, now=T0 + 20))


def test_a_heartbeat_can_hold_a_leader_lease_in_its_own_write(run: Any, queue: str) -> None:
    renew = LeaderRenewal(f"maintenance-{queue}", ttl_seconds=10)

    def beat(worker: str, at: float, lease: LeaderRenewal | None = renew) -> bool | None:
        return run(job_heartbeat(worker, [], lease_seconds=LEASE, renew=lease, now=at)).leader_held

    assert beat("a", T0) is True
    assert not run(leader_attempt_elect(renew.name, "b", ttl_seconds=10, now=T0 + 9))
    assert beat("a", T0 + 8) is True  # renewed: now held until T0 + 18
    assert not run(leader_attempt_elect(renew.name, "b", ttl_seconds=10, now=T0 + 17))
    assert run(leader_attempt_elect(renew.name, "b", ttl_seconds=10, now=T0 + 19))
    assert beat("a", T0 + 20) is False
    assert beat("a", T0 + 20, lease=None) is None


# -- listing ----------------------------------------------------------------------------


def test_list_filters_and_pages_by_keyset(run: Any, queue: str) -> None:
    ids = _enqueue(run, queue, 7, submitter="alice")
    _enqueue(run, queue, 2, submitter="bob")
    [claimed] = _claim(run, queue, worker=f"w-{queue}", limit=1)
    pages: list[int] = []
    before = None
    while True:
        page = run(job_list(queue=queue, submitter="alice", limit=3, before=before))
        if not page:
            break
        pages += [job.id for job in page]
        before = page[-1].id
    assert pages == sorted(ids, reverse=True)
    assert [j.id for j in run(job_list(state=JobState.RUNNING, queue=queue))] == [
        claimed.lease.job_id
    ]
    assert [j.id for j in run(job_list(worker_id=f"w-{queue}"))] == [claimed.lease.job_id]
    assert len(run(job_list(submitter="bob", queue=queue))) == 2


def test_list_by_each_state_finds_exactly_its_jobs_newest_first(run: Any, queue: str) -> None:
    """Each state is listed through an index of its own kind (see migration 0003)."""
    _enqueue(run, queue, 2, max_attempts=1)
    [failing] = _enqueue(run, queue, 1, max_attempts=2)
    claimed = _claim(run, queue, limit=3)
    run(report_one(completed(claimed[0].lease, None), now=T0))
    run(report_one(failed(claimed[1].lease, {"type": "E", "message": ""}), now=T0))
    lease = claimed[2].lease
    run(report_one(failed(lease, {"type": "E", "message": ""}, retryable=False), now=T0))
    queued = _enqueue(run, queue, 5)
    running = [job.lease.job_id for job in _claim(run, queue, limit=2)]
    [cancelled] = queued[-1:]
    run(job_cancel([cancelled], now=T0))
    expected = {
        JobState.QUEUED: sorted(set(queued[:-1]) - set(running), reverse=True),
        JobState.RUNNING: sorted(running, reverse=True),
        JobState.SUCCEEDED: [claimed[0].lease.job_id],
        JobState.DEAD: [claimed[1].lease.job_id],
        JobState.FAILED: [failing],
        JobState.CANCELLED: [cancelled],
    }
    assert lease.job_id == failing
    for state, ids in expected.items():
        assert [job.id for job in run(job_list(state=state, queue=queue))] == ids, state
        assert all(job.state is state for job in run(job_list(state=state, queue=queue)))
        paged: list[int] = []
        before = None
        while page := run(job_list(state=state, queue=queue, limit=1, before=before)):
            paged.append(page[0].id)
            before = page[0].id
        assert paged == ids, state


def test_counts_follow_every_transition(run: Any, queue: str) -> None:
    _enqueue(run, queue, 5, max_attempts=1)
    claimed = _claim(run, queue, limit=3)
    run(report_one(completed(claimed[0].lease, None), now=T0))
    run(report_one(failed(claimed[1].lease, {"type": "E", "message": ""}), now=T0))
    run(job_cancel([claimed[2].lease.job_id], now=T0))
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert {state.value: n for state, n in stats.counts.items() if n} == {
        "queued": 2,
        "running": 1,
        "succeeded": 1,
        "dead": 1,
    }


# -- store time -------------------------------------------------------------------------


def test_without_an_injected_time_the_store_clock_decides(
    run: Any, store: Store, queue: str
) -> None:
    [job_id] = run(job_enqueue([call_spec("m:f", queue=queue)]))
    [claimed] = run(job_claim("w", [queue], limit=1, lease_seconds=LEASE))
    [clock] = store.query(
        Statement("SELECT now FROM taskq_clock"), consistency=Consistency.LINEARIZABLE
    )
    assert claimed.lease_until == pytest.approx(clock["now"] + LEASE, abs=0.5)
    job = run(job_get(job_id))
    assert job.created_at <= clock["now"]
    assert clock["now"] - job.created_at < 60
    assert json.loads(json.dumps(job.payload)) == job.payload


def _clock_after_a_tick_from(store: Store, start: float) -> float:
    """The store clock set to ``start``, then ticked by a write on its own clock."""
    store.execute([Statement("UPDATE taskq_clock SET now = :now WHERE id = 1", {"now": start})])
    store.execute([clock_tick(None)])
    [clock] = store.query(
        Statement("SELECT now FROM taskq_clock"), consistency=Consistency.LINEARIZABLE
    )
    return float(clock["now"])


def test_a_write_that_reads_an_earlier_time_leaves_the_store_clock_where_it_was(
    store: Store,
) -> None:
    """rqlite reads a write's time when it arrives; a late commit must not move time back."""
    ahead = time.time() + 0.6
    assert _clock_after_a_tick_from(store, ahead) == ahead


def test_a_store_clock_far_ahead_of_the_real_one_comes_back_to_it(store: Store) -> None:
    """A clock set back, or a test's injected time, is not waited out."""
    real = time.time()
    assert _clock_after_a_tick_from(store, real + 3600) == pytest.approx(real, abs=5)


def test_the_idle_read_sees_a_new_job_at_once(run: Any, queue: str) -> None:
    """On the store's real clock, as an idle worker polls.

    rqlite rounds a write's clock to about 86 ms, so half the new jobs would
    look not yet due to a read of the exact clock.
    """
    assert run(job_claimable([queue])) is False
    for _ in range(12):
        run(job_enqueue([call_spec("m:f", queue=queue)]))
        assert run(job_claimable([queue])) is True
        assert len(run(job_claim("w", [queue], limit=10, lease_seconds=LEASE))) == 1
        assert run(job_claimable([queue])) is False
        # The read a look makes right after another worker's: the leader's copy.
        assert run(job_claimable([queue], fresh=True)) is False
    run(job_enqueue([call_spec("m:f", queue=queue, delay=5.0)]))
    assert run(job_claimable([queue])) is False
    run(job_enqueue([call_spec("m:f", queue=queue)]))
    run(queue_set_paused(queue, True))
    assert run(job_claimable([queue])) is False


def test_the_backlog_counts_what_a_claim_would_take_now(run: Any, queue: str) -> None:
    """On the store's real clock, as an autoscaling worker reads it."""
    other = f"{queue}-other"
    assert run(job_backlog([queue], [], limit=100)) == 0
    run(job_enqueue([call_spec("m:f", queue=queue) for _ in range(5)]))
    run(job_enqueue([call_spec("m:f", queue=queue, delay=60.0)]))
    run(job_enqueue([call_spec("m:f", queue=queue, labels=["gpu"])]))
    run(job_enqueue([call_spec("m:f", queue=other) for _ in range(2)]))
    assert run(job_backlog([queue], [], limit=100)) == 5  # not the delayed or the gpu job
    assert run(job_backlog([queue], ["gpu"], limit=100)) == 6
    assert run(job_backlog([queue, other], [], limit=100)) == 7
    assert run(job_backlog([queue, other], [], limit=4)) == 4
    assert run(job_backlog([queue], [], limit=0)) == 0

    run(queue_set_limits(queue, max_running=3))
    assert len(run(job_claim("w", [queue], limit=1, lease_seconds=LEASE))) == 1
    assert run(job_backlog([queue], [], limit=100)) == 2  # three at once, one running
    run(queue_set_limits(queue, max_running=None, rate_limit=1, rate_period=3600))
    assert run(job_backlog([queue], [], limit=100)) == 1  # one start left in the bucket
    run(queue_set_limits(queue, rate_limit=None))
    run(queue_set_paused(queue, True))
    assert run(job_backlog([queue, other], [], limit=100)) == 2


def test_text_filter_matches_payload_or_queue(run: Any, queue: str) -> None:
    [resize] = run(job_enqueue([call_spec("images.tools:resize", ["a.png"], queue=queue)]))
    [crop] = run(job_enqueue([call_spec("images.tools:crop", ["b.png"], queue=queue)]))
    assert [job.id for job in run(job_list(text="resize", queue=queue))] == [resize]
    assert [job.id for job in run(job_list(text="b.png"))] == [crop]
    assert {job.id for job in run(job_list(text=queue))} == {resize, crop}


def test_throughput_counts_finished_attempts_per_minute(run: Any, queue: str) -> None:
    # On the store's own clock: the throughput read counts back from it.
    run(job_enqueue([call_spec("m:f", queue=queue, max_attempts=1) for _ in range(3)]))
    claimed = run(job_claim("w", [queue], limit=3, lease_seconds=LEASE))
    run(report_one(completed(claimed[0].lease, 1)))
    run(report_one(completed(claimed[1].lease, 2)))
    run(report_one(failed(claimed[2].lease, {"type": "E", "message": ""})))
    buckets = run(execution_throughput(minutes=5))
    assert [bucket.minutes_ago for bucket in buckets] == [4, 3, 2, 1, 0]
    recent = buckets[-1].outcomes
    assert recent.get("succeeded", 0) >= 2
    assert recent.get("error", 0) >= 1


# -- schedules --------------------------------------------------------------------------


def test_a_schedule_fires_each_tick_once(run: Any, queue: str) -> None:
    name = f"every-minute-{queue}"
    spec = call_spec("reports:daily", ["x"], queue=queue, priority=3, max_attempts=2)
    created = run(schedule_add(name, spec, every_seconds=60, now=T0))
    assert created.schedule.next_fire_at == T0 + 60
    assert run(schedule_fire_due(now=T0 + 59)) == []
    [fired] = [f for f in run(schedule_fire_due(now=T0 + 61)) if f.schedule == name]
    assert fired.fire_at == T0 + 60
    assert [f for f in run(schedule_fire_due(now=T0 + 62)) if f.schedule == name] == []
    job = run(job_get(fired.job_id))
    assert (job.queue, job.priority, job.max_attempts, job.run_at) == (queue, 3, 2, T0 + 60)
    assert job.payload["target"] == "reports:daily"
    assert job.submitter == f"schedule:{name}"
    [listed] = [s for s in run(schedule_list()) if s.name == name]
    assert (listed.next_fire_at, listed.last_fired_at) == (T0 + 120, T0 + 60)


def test_a_gap_fires_the_latest_tick_once_and_skip_fires_none(run: Any, queue: str) -> None:
    once, skip = f"once-{queue}", f"skip-{queue}"
    spec = call_spec("m:f", queue=queue)
    run(schedule_add(once, spec, every_seconds=600, now=T0))
    run(schedule_add(skip, spec, every_seconds=600, catch_up="skip", now=T0))
    # Five ticks missed, the latest 90 s ago: "once" fires it, "skip" lets it go.
    fired = [f for f in run(schedule_fire_due(now=T0 + 3600 + 90)) if queue in f.schedule]
    assert [(f.schedule, f.fire_at) for f in fired] == [(once, T0 + 3600)]
    assert len(run(job_list(queue=queue))) == 1


def test_paused_and_removed_schedules_do_not_fire(run: Any, queue: str) -> None:
    name = f"paused-{queue}"
    run(schedule_add(name, call_spec("m:f", queue=queue), every_seconds=10, now=T0))
    assert run(schedule_set_paused(name, True))
    assert not [f for f in run(schedule_fire_due(now=T0 + 100)) if f.schedule == name]
    assert run(schedule_set_paused(name, False))
    assert [f.schedule for f in run(schedule_fire_due(now=T0 + 100)) if f.schedule == name] == [
        name
    ]
    assert run(schedule_remove(name))
    assert not run(schedule_remove(name))
    assert not run(schedule_set_paused(name, True))


def test_cron_schedules_in_a_time_zone(run: Any, queue: str) -> None:
    name = f"cron-{queue}"
    run(
        schedule_add(
            name,
            call_spec("m:f", queue=queue),
            cron="*/15 * * * *",
            timezone="Asia/Kolkata",
            now=T0,
        )
    )
    [listed] = [s for s in run(schedule_list()) if s.name == name]
    # India is UTC+5:30: quarter hours there are quarter hours in UTC too.
    assert listed.next_fire_at % 900 == 0
    assert T0 < listed.next_fire_at <= T0 + 900
    with pytest.raises(errors.ConfigError, match="bad cron"):
        run(schedule_add(name, call_spec("m:f", queue=queue), cron="every day", now=T0))


# -- limits -----------------------------------------------------------------------------


def test_max_running_caps_a_queue_across_claims(run: Any, queue: str) -> None:
    _enqueue(run, queue, 5)
    run(queue_set_limits(queue, max_running=2, now=T0))
    first = _claim(run, queue, worker="a", limit=10)
    assert len(first) == 2
    assert _claim(run, queue, worker="b", limit=10) == []
    run(report_one(completed(first[0].lease, None), now=T0))
    assert len(_claim(run, queue, worker="b", limit=10)) == 1
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert (stats.max_running, stats.counts[JobState.RUNNING]) == (2, 2)
    run(queue_set_limits(queue, max_running=None, now=T0))
    assert len(_claim(run, queue, limit=10)) == 2


def test_rate_limit_spaces_out_starts(run: Any, queue: str) -> None:
    _enqueue(run, queue, 10)
    run(queue_set_limits(queue, rate_limit=3, rate_period=10, now=T0))
    assert len(_claim(run, queue, limit=10, now=T0)) == 3
    assert _claim(run, queue, limit=10, now=T0 + 1) == []
    # 10/3 s per token: 5 s later one whole token has come back.
    assert len(_claim(run, queue, limit=10, now=T0 + 5)) == 1
    assert len(_claim(run, queue, limit=10, now=T0 + 60)) == 3


def test_setting_one_limit_keeps_the_other_and_its_bucket(run: Any, queue: str) -> None:
    _enqueue(run, queue, 10)
    run(queue_set_limits(queue, max_running=5, now=T0))
    run(queue_set_limits(queue, rate_limit=3, rate_period=10, now=T0))
    assert len(_claim(run, queue, limit=10, now=T0)) == 3
    # Changing the cap alone neither lifts the rate nor refills its bucket.
    run(queue_set_limits(queue, max_running=4, now=T0))
    assert _claim(run, queue, limit=10, now=T0 + 1) == []
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert (stats.max_running, stats.rate_limit, stats.rate_period) == (4, 3, 10)
    run(queue_set_limits(queue, rate_limit=None, now=T0))
    # The rate is lifted; the cap of 4 still holds with 3 running.
    assert len(_claim(run, queue, limit=10, now=T0 + 1)) == 1
    [stats] = [s for s in run(job_counts()) if s.queue == queue]
    assert (stats.max_running, stats.rate_limit) == (4, None)


def test_submitters_over_their_rate_are_refused_with_a_retry_time(run: Any, queue: str) -> None:
    alice, bob = f"alice-{queue}", f"bob-{queue}"
    run(submit_limit_set(alice, 5, 60))

    def submit(who: str, count: int, at: float) -> list[int]:
        specs = [call_spec("m:f", queue=queue, submitter=who) for _ in range(count)]
        ids: list[int] = run(job_enqueue(specs, now=at))
        return ids

    assert len(submit(alice, 3, T0)) == 3
    with pytest.raises(errors.RateLimited, match="retry in") as caught:
        submit(alice, 3, T0 + 1)
    assert caught.value.retry_after == pytest.approx(12 - 1, abs=1.5)
    assert len(run(job_list(queue=queue, submitter=alice))) == 3
    assert len(submit(alice, 3, T0 + 13)) == 3
    with pytest.raises(errors.RateLimited, match="can never fit") as never:
        submit(alice, 6, T0 + 1000)
    assert never.value.retry_after is None
    assert len(submit(bob, 20, T0)) == 20
    run(submit_limit_remove(alice))
    assert len(submit(alice, 20, T0 + 14)) == 20


def test_a_submitters_own_rate_comes_before_the_rate_for_everyone(run: Any, queue: str) -> None:
    """'*' limits whoever has no limit of their own; an own limit replaces it, lower or higher."""
    anyone, strict, generous = (f"{who}-{queue}" for who in ("anyone", "strict", "generous"))

    def submit(who: str, count: int) -> list[int]:
        specs = [call_spec("m:f", queue=queue, submitter=who) for _ in range(count)]
        ids: list[int] = run(job_enqueue(specs, now=T0))
        return ids

    # The limit for everyone reaches every test on a shared cluster: it goes
    # again before the next test (tests of one session run one at a time).
    try:
        run(submit_limit_set("*", 4, 60))
        run(submit_limit_set(strict, 2, 60))
        run(submit_limit_set(generous, 10, 60))
        assert len(submit(anyone, 4)) == 4
        with pytest.raises(errors.RateLimited, match=f"'{anyone}' may submit 4 jobs"):
            submit(anyone, 1)
        assert len(submit(strict, 2)) == 2
        with pytest.raises(errors.RateLimited, match=f"'{strict}' may submit 2 jobs"):
            submit(strict, 1)
        assert len(submit(generous, 10)) == 10
    finally:
        for who in ("*", strict, generous):
            run(submit_limit_remove(who))


def test_one_request_reports_many_attempts_each_fenced(run: Any, queue: str) -> None:
    ok, failing, released, stale = _enqueue(run, queue, 4)
    claimed = {job.lease.job_id: job.lease for job in _claim(run, queue, limit=4)}
    forged = Lease(job_id=stale, token="someone else's")
    reports = [
        Report(claimed[ok], ReportKind.COMPLETE, AttemptReport("succeeded"), result=[1, 2]),
        Report(
            claimed[failing],
            ReportKind.FAIL,
            AttemptReport("error"),
            error={"type": "E", "message": "m"},
        ),
        Report(claimed[released], ReportKind.RELEASE, AttemptReport("released")),
        Report(forged, ReportKind.COMPLETE, AttemptReport("succeeded"), result="zombie"),
    ]
    verdicts = run(job_report(reports, now=T0 + 1))
    assert verdicts == [Fenced.ACCEPTED, Fenced.ACCEPTED, Fenced.ACCEPTED, Fenced.LEASE_LOST]
    states = {job_id: run(job_get(job_id)).state for job_id in (ok, failing, released, stale)}
    assert states == {
        ok: JobState.SUCCEEDED,
        failing: JobState.QUEUED,
        released: JobState.QUEUED,
        stale: JobState.RUNNING,
    }
    assert run(job_get(ok)).result == [1, 2]


def test_resubmitted_keys_spend_no_rate(run: Any, queue: str) -> None:
    who = f"carol-{queue}"
    run(submit_limit_set(who, 10, 60))

    def submit(keys: list[str]) -> list[int]:
        specs = [call_spec("m:f", queue=queue, submitter=who, idempotency_key=k) for k in keys]
        ids: list[int] = run(job_enqueue(specs, now=T0))
        return ids

    first = submit([f"{queue}-{i}" for i in range(6)])
    # The same request again, as a transport resends it after a lost answer.
    assert submit([f"{queue}-{i}" for i in range(6)]) == first
    assert len(submit([f"{queue}-{i}" for i in range(6, 10)])) == 4
    with pytest.raises(errors.RateLimited):
        submit([f"{queue}-10"])
