"""Idle workers' offers (``taskq.broker.ops.offers``): the write that readies a job hands it
to the oldest fresh offer it fits, by the claim's rules, and the job is the worker's once
taken. Run on both stores; names are unique per test (the cluster is shared).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.ops import offers, plan
from taskq.broker.ops.claims import ClaimRequest
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.leases import job_report_claim
from taskq.broker.ops.maintenance import job_requeue_expired, worker_mark_lost
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import queue_set_limits, queue_set_paused
from taskq.broker.ops.workers import worker_register, worker_set_state
from taskq.broker.records import ClaimedJob, JobState
from taskq.broker.stores.store import Consistency, Statement, Store

T = TypeVar("T")
T0 = 1_800_000_000.0
LEASE = 30.0
FRESH = 10.0

Run = Callable[[Op[Any]], Any]


@pytest.fixture
def queue() -> str:
    return f"offers-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def run(store: Store) -> Run:
    def carry_out(op: Op[T]) -> T:
        return plan.run(store, op)

    return carry_out


def _worker(run: Run, queue: str, *, labels: tuple[str, ...] = (), now: float = T0) -> str:
    worker = f"w-{uuid.uuid4().hex[:10]}"
    run(
        worker_register(
            worker,
            name=worker,
            host="lab",
            pid=1,
            queues=[queue],
            labels=list(labels),
            slots=1,
            now=now,
        )
    )
    return worker


def _request(worker: str, queue: str, **fields: Any) -> ClaimRequest:
    return ClaimRequest(worker, (queue,), 1, LEASE, **fields)


def _offer(
    run: Run, worker: str, queue: str, *, labels: tuple[str, ...] = (), now: float = T0
) -> str:
    """The worker's idle claim, which finds nothing and leaves an offer: its token."""
    token = uuid.uuid4().hex[:16]
    request = _request(worker, queue, labels=labels, offer=token, offer_fresh_seconds=FRESH)
    answer = run(job_report_claim([], request, now=now))
    assert answer.claimed == []
    assert answer.offer_made
    return token


def _submit(run: Run, queue: str, *, now: float = T0, **options: Any) -> int:
    [job_id] = run(job_enqueue([call_spec("example.jobs:noop", queue=queue, **options)], now=now))
    return int(job_id)


def _handed(run: Run, worker: str, queue: str, token: str) -> list[ClaimedJob]:
    return list(run(offers.job_handed(_request(worker, queue), token)))


def _offers_of(store: Store, *workers: str) -> set[str]:
    rows = store.query(
        Statement(
            "SELECT worker_id FROM worker_offers "
            "WHERE worker_id IN (SELECT value FROM json_each(:workers))",
            {"workers": json.dumps(list(workers))},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    return {str(row["worker_id"]) for row in rows}


def test_a_submit_hands_its_job_to_an_idle_workers_offer(run: Run, queue: str) -> None:
    worker = _worker(run, queue)
    token = _offer(run, worker, queue)
    job_id = _submit(run, queue)
    job = run(job_get(job_id))
    assert (job.state, job.worker_id, job.attempts) == (JobState.RUNNING, worker, 1)
    [handed] = _handed(run, worker, queue, token)
    assert handed.lease.job_id == job_id
    assert handed.lease.token == f"{token}.{job_id}"
    assert handed.lease_until == T0 + LEASE


def test_the_oldest_fresh_offer_of_an_active_worker_is_filled(
    run: Run, store: Store, queue: str
) -> None:
    first, second, gone = (_worker(run, queue) for _ in range(3))
    tokens = {
        gone: _offer(run, gone, queue, now=T0),
        first: _offer(run, first, queue, now=T0 + 1),
        second: _offer(run, second, queue, now=T0 + 2),
    }
    run(worker_set_state(gone, "draining", now=T0 + 3))
    job_id = _submit(run, queue, now=T0 + 3)
    assert run(job_get(job_id)).worker_id == first
    assert _offers_of(store, first, second, gone) == {second, gone}
    # Stale once its worker's heartbeats stopped moving it: a job waits for a claim.
    later = _submit(run, queue, now=T0 + 2 + FRESH + 1)
    assert run(job_get(later)).state is JobState.QUEUED
    assert _handed(run, second, queue, tokens[second]) == []
    # Maintenance drops the offers no write would fill.
    run(worker_mark_lost(grace_seconds=3600, now=T0 + 20))
    assert _offers_of(store, first, second, gone) == {second}


@pytest.mark.parametrize("rule", ["paused", "max_running", "labels", "not_due"])
def test_an_offer_takes_only_a_job_a_claim_would(run: Run, queue: str, rule: str) -> None:
    worker = _worker(run, queue)
    token = _offer(run, worker, queue)
    options: dict[str, Any] = {}
    if rule == "paused":
        run(queue_set_paused(queue, True, create=True, now=T0))
    elif rule == "max_running":
        run(queue_set_limits(queue, max_running=0, create=True, now=T0))
    elif rule == "labels":
        options["labels"] = ["gpu"]
    else:
        options["delay"] = 5.0
    job_id = _submit(run, queue, **options)
    assert run(job_get(job_id)).state is JobState.QUEUED
    assert _handed(run, worker, queue, token) == []


def test_an_offer_spends_the_queues_rate_as_a_claim_does(run: Run, queue: str) -> None:
    run(queue_set_limits(queue, rate_limit=1, rate_period=3600, create=True, now=T0))
    first, second = _worker(run, queue), _worker(run, queue)
    first_token = _offer(run, first, queue)
    second_token = _offer(run, second, queue, now=T0 + 1)
    _submit(run, queue, now=T0 + 1)  # the bucket's one start, to the first offer
    assert len(_handed(run, first, queue, first_token)) == 1
    waiting = _submit(run, queue, now=T0 + 1)
    assert run(job_get(waiting)).state is JobState.QUEUED
    assert _handed(run, second, queue, second_token) == []


def test_a_heartbeat_takes_a_handed_job_and_one_not_taken_goes_back_uncounted(
    run: Run, queue: str
) -> None:
    taking, frozen = _worker(run, queue), _worker(run, queue)
    taken_token = _offer(run, taking, queue)
    taken = _submit(run, queue)
    frozen_token = _offer(run, frozen, queue, now=T0 + 1)
    untaken = _submit(run, queue, now=T0 + 1)
    [job] = _handed(run, taking, queue, taken_token)
    beat = run(job_heartbeat(taking, [job.lease], lease_seconds=LEASE, now=T0 + 2))
    assert beat.kept == {job.lease}
    assert len(_handed(run, frozen, queue, frozen_token)) == 1  # read, never taken
    moved = run(job_requeue_expired(now=T0 + 1 + FRESH + 1))
    assert untaken in moved.requeued
    assert taken not in moved.requeued
    back = run(job_get(untaken))
    assert (back.state, back.attempts, back.worker_id) == (JobState.QUEUED, 0, None)
    assert run(job_get(taken)).state is JobState.RUNNING


def test_a_claim_withdraws_the_offer_and_brings_what_it_was_handed(
    run: Run, store: Store, queue: str
) -> None:
    worker = _worker(run, queue)
    token = _offer(run, worker, queue)
    handed = _submit(run, queue)
    queued = _submit(run, queue)  # the offer is filled: this one waits for a claim
    answer = run(job_report_claim([], _request(worker, queue, withdraw=token), now=T0))
    assert sorted(job.lease.job_id for job in answer.claimed) == [handed, queued]
    assert _offers_of(store, worker) == set()
    # A worker holding a job leaves no offer.
    again = _request(worker, queue, offer="f" * 16, offer_fresh_seconds=FRESH)
    assert not run(job_report_claim([], again, now=T0)).offer_made
    assert _offers_of(store, worker) == set()
