"""Retry policies, checkpoints and queue job defaults in the store, on both stores.

Time is injected (``now=``): a report's delay is added to the store's time
by the statement itself.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec
import pytest

from taskq import errors
from taskq.broker.client.specs import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_progress
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.queues import job_counts, queue_set_defaults
from taskq.broker.records import JobState
from taskq.broker.stores.store import Consistency, Statement, Store
from taskq.retry import RetryPolicy
from tests.support.reports import failed, released, report_one

T0 = 1_800_000_000.0
ERROR = {"type": "ValueError", "message": "no"}


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def _run(store: Store, op: Any) -> Any:
    return plan.run(store, op)


def _claim_one(store: Store, queue: str, now: float) -> Any:
    [claimed] = _run(store, job_claim("w1", [queue], limit=1, lease_seconds=30, now=now))
    return claimed


def test_a_reports_own_delay_is_added_to_store_time_and_give_up_ends_the_job_dead(
    store: Store, queue: str
) -> None:
    [later, abort] = _run(
        store, job_enqueue([call_spec("m:f", queue=queue, max_attempts=5)] * 2, now=T0)
    )
    first = _claim_one(store, queue, T0)
    _run(
        store,
        report_one(
            msgspec.structs.replace(failed(first.lease, ERROR), retry_delay=600.0), now=T0 + 1
        ),
    )
    assert _run(store, job_get(later)).run_at == pytest.approx(T0 + 601, abs=0.1)
    second = _claim_one(store, queue, T0 + 2)
    _run(
        store,
        report_one(msgspec.structs.replace(failed(second.lease, ERROR), give_up=True), now=T0 + 3),
    )
    job = _run(store, job_get(abort))
    assert (job.state, job.attempts) == (JobState.DEAD, 1)


def test_a_checkpoint_saved_in_progress_or_a_report_is_handed_to_the_next_claim(
    store: Store, queue: str
) -> None:
    [job_id] = _run(store, job_enqueue([call_spec("m:f", queue=queue, max_attempts=3)], now=T0))
    first = _claim_one(store, queue, T0)
    assert first.checkpoint_json is None
    _run(store, job_progress(first.lease, 0.5, "half", checkpoint_json='{"page":5}'))
    _run(store, job_requeue_expired(now=T0 + 100))  # its worker died
    second = _claim_one(store, queue, T0 + 101)
    assert second.checkpoint_json == '{"page":5}'
    report = msgspec.structs.replace(released(second.lease), checkpoint_json='{"page":9}')
    _run(store, report_one(report, now=T0 + 102))
    assert _claim_one(store, queue, T0 + 103).checkpoint_json == '{"page":9}'
    assert _run(store, job_get(job_id)).checkpoint == {"page": 9}


def test_queue_defaults_fill_in_what_a_job_leaves_out(store: Store, queue: str) -> None:
    policy = RetryPolicy(base=30.0, retry_on=(OSError,))
    _run(
        store,
        queue_set_defaults(
            queue,
            timeout=60,
            max_attempts=7,
            limits={"memory_bytes": "256MiB", "cpu_seconds": 5},
            retry=policy,
            create=True,  # set up ahead of its first job
        ),
    )
    _run(store, queue_set_defaults(queue, limits={"cpu_seconds": None}, timeout=None))
    [stats] = [q for q in _run(store, job_counts()) if q.queue == queue]
    assert stats.job_defaults["max_attempts"] == 7
    assert "timeout" not in stats.job_defaults
    own = RetryPolicy(base=1.0)
    bare, explicit = _run(
        store,
        job_enqueue(
            [
                call_spec("m:f", queue=queue, limits={"wall_seconds": 9}),
                call_spec("m:f", queue=queue, max_attempts=2, timeout=5, retry=own),
            ],
            now=T0,
        ),
    )
    job = _run(store, job_get(bare))
    assert (job.max_attempts, job.timeout) == (7, None)
    assert job.limits == {"memory_bytes": "256MiB", "wall_seconds": 9}
    assert job.retry["retry_on"] == ["OSError"]
    job = _run(store, job_get(explicit))
    assert (job.max_attempts, job.timeout, job.retry["base"]) == (2, 5.0, 1.0)


def test_a_queue_whose_last_default_limit_is_lifted_is_forgotten(store: Store, queue: str) -> None:
    _run(store, queue_set_defaults(queue, limits={"memory_bytes": "1GiB"}, create=True))
    _run(store, queue_set_defaults(queue, limits={"memory_bytes": None}))
    # No empty "limits" left behind to keep it: with no jobs and no settings, it is gone.
    assert queue not in {stats.queue for stats in _run(store, job_counts())}


def test_a_job_submitted_alone_is_stored_as_in_a_batch(store: Store, queue: str) -> None:
    """One job's INSERT (its fields as parameters) writes the row the batch INSERT writes.

    Every column but the id and the key, with the queue's defaults to fill in
    or merge, and every field a job may set.
    """
    _run(
        store,
        queue_set_defaults(
            queue,
            max_attempts=7,
            limits={"memory_bytes": "256MiB"},
            retry=RetryPolicy(base=30.0),
            create=True,
        ),
    )
    specs = [
        call_spec("m:f", [1, "x"], {"k": [0.5]}, queue=queue, delay=5.5, submitter="me"),
        call_spec(
            "m:f",
            queue=queue,
            run_at=T0 + 50,
            priority=3,
            labels=["gpu", "big"],
            limits={"wall_seconds": 9},
            max_attempts=2,
            timeout=5,
            retry=RetryPolicy(base=1.5, retry_on=(OSError,)),
        ),
        call_spec("m:f", queue=f"{queue}-bare", timeout=2.25),
    ]
    prefix = uuid.uuid4().hex
    alone = [
        _run(
            store,
            job_enqueue(
                [msgspec.structs.replace(spec, idempotency_key=f"{prefix}-alone-{at}")], now=T0
            ),
        )[0]
        for at, spec in enumerate(specs)
    ]
    batch = [
        msgspec.structs.replace(spec, idempotency_key=f"{prefix}-batch-{at}")
        for at, spec in enumerate(specs)
    ]
    together = _run(store, job_enqueue(batch, now=T0))
    assert _stored(store, alone) == _stored(store, together)


def _stored(store: Store, ids: list[int]) -> list[dict[str, Any]]:
    rows = store.query(
        Statement(
            "SELECT * FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id",
            {"ids": json.dumps(ids)},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    return [{k: v for k, v in row.items() if k not in {"id", "idempotency_key"}} for row in rows]


def test_bad_queue_defaults_are_refused_and_nothing_is_written(store: Store, queue: str) -> None:
    with pytest.raises(errors.InvalidJob, match="max_attempts"):
        _run(store, queue_set_defaults(queue, max_attempts=0, timeout=5))
    with pytest.raises(errors.InvalidJob, match="retry"):
        _run(store, queue_set_defaults(queue, retry={"base": -1}))
    assert [q for q in _run(store, job_counts()) if q.queue == queue] == []
