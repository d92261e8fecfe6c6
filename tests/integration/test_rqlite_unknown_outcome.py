"""The leader of a real 3-node cluster is killed while jobs stream in and out.

One thread enqueues jobs with idempotency keys k0, k1, ... and, like any
client, resends the same key after any store error. Another claims and
completes them. The leader is SIGKILLed in the middle, so some writes of
both have an unknown outcome. Afterwards, read linearizably: there is exactly
one job per key and it is the one the stream was told about; every job's
attempts equal its execution rows; no job was claimed twice (its lease is far
longer than the test), apart from a claim whose answer was lost for good,
which only its lease's expiry may give back.
"""

from __future__ import annotations

import functools
import itertools
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.plan import Op
from taskq.broker.records import Fenced, JobState, Lease
from taskq.broker.stores.store import Consistency, Store
from tests.support.job_tables import execution_rows, job_rows
from tests.support.reports import completed, report_one
from tests.support.rqlite_cluster import running_cluster

LEASE_SECONDS = 600.0
KEYS_BEFORE_KILL = 60
KEYS_AFTER_KILL = 60
# A client gives up on one request after this long; the test then fails.
RETRY_FOR_SECONDS = 45.0
RUN_TIMEOUT_SECONDS = 90.0
CONSUMER = "consumer"

T = TypeVar("T")

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster


@dataclass
class Stream:
    """What both threads saw, by the monotonic clock."""

    acked: dict[str, tuple[int, float]] = field(default_factory=dict)
    claims: list[tuple[Lease, int, float]] = field(default_factory=list)
    completed: list[tuple[Lease, float]] = field(default_factory=list)
    store_errors: list[tuple[str, str, float]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    killed_at: float | None = None
    submitted_all: threading.Event = field(default_factory=threading.Event)

    def after_kill(self, moments: list[float]) -> list[float]:
        return [at for at in moments if self.killed_at is not None and at > self.killed_at]


def test_no_duplicate_or_double_claim_when_the_leader_dies(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        queue = f"unknown-{uuid.uuid4().hex}"
        stream = Stream()
        stores = [open_store(cluster.url) for _ in range(3)]
        submitter_store, consumer_store, checker = stores
        try:
            submitter = threading.Thread(
                target=guarded, args=(stream, submit_keys, submitter_store, queue), daemon=True
            )
            consumer = threading.Thread(
                target=guarded,
                args=(stream, claim_and_complete, consumer_store, queue),
                daemon=True,
            )
            submitter.start()
            consumer.start()
            deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
            while (
                len(stream.acked) < KEYS_BEFORE_KILL
                or len(stream.completed) < KEYS_BEFORE_KILL // 2
            ) and not stream.failures:
                assert time.monotonic() < deadline, "the stream did not get going"
                time.sleep(0.01)
            old_leader = cluster.wait_for_leader()
            stream.killed_at = time.monotonic()
            cluster.kill_node(old_leader, signal.SIGKILL)
            submitter.join(timeout=RUN_TIMEOUT_SECONDS)
            consumer.join(timeout=RUN_TIMEOUT_SECONDS)
            assert not submitter.is_alive(), "the submitter never finished"
            assert not consumer.is_alive(), "the consumer never finished"
            assert not stream.failures, f"a thread failed: {stream.failures[0]!r}"
            assert not stream.anomalies, stream.anomalies
            assert cluster.wait_for_leader() is not old_leader

            report_stall(stream, old_leader.node_id)
            orphans = finish_orphaned_claims(checker, queue)
            check_store(checker, queue, stream, orphans)
        finally:
            for store in stores:
                store.close()


def guarded(
    stream: Stream, body: Callable[[Stream, Store, str], None], store: Store, queue: str
) -> None:
    """Run a thread's body; record what escapes, so the test can fail with it."""
    try:
        body(stream, store, queue)
    except BaseException as exc:
        stream.failures.append(exc)
        stream.submitted_all.set()


def submit_keys(stream: Stream, store: Store, queue: str) -> None:
    """Enqueue k0, k1, ... one request each, resending a key after any store error."""
    index = 0
    while True:
        key = f"{queue}-k{index}"
        spec = call_spec("example.jobs:noop", [index], queue=queue, idempotency_key=key)
        enqueue = functools.partial(job_enqueue, [spec])
        [job_id] = retrying(stream, f"enqueue {key}", store, enqueue)
        stream.acked[key] = (job_id, time.monotonic())
        index += 1
        if len(stream.after_kill([at for _, at in stream.acked.values()])) >= KEYS_AFTER_KILL:
            stream.submitted_all.set()
            return


def claim_and_complete(stream: Stream, store: Store, queue: str) -> None:
    """Claim 1-3 jobs at a time and complete each, until the stream ends and none is left."""
    limits = random.Random(0)
    while True:
        claim = functools.partial(
            job_claim,
            CONSUMER,
            [queue],
            limit=limits.randint(1, 3),
            lease_seconds=LEASE_SECONDS,
        )
        claimed = retrying(stream, "claim", store, claim)
        if not claimed:
            if stream.submitted_all.is_set():
                return
            time.sleep(0.01)
            continue
        for job in claimed:
            stream.claims.append((job.lease, job.attempt, time.monotonic()))
            complete(stream, store, job.lease)


def complete(stream: Stream, store: Store, lease: Lease) -> None:
    """Complete under ``lease``; resending after an error is safe because it is fenced."""
    what = f"complete {lease.job_id}"
    outcome = retrying(stream, what, store, lambda: report_one(completed(lease, "ok")))
    if outcome is Fenced.LEASE_LOST:
        # After an error, the first try may have landed: then the resend is refused
        # because the job already succeeded under this very lease.
        job = plan.run(store, job_get(lease.job_id, consistency=Consistency.LINEARIZABLE))
        landed = (
            job is not None
            and job.state is JobState.SUCCEEDED
            and job.worker_id == CONSUMER
            and any(failed == what for failed, _, _ in stream.store_errors)
        )
        if not landed:
            stream.anomalies.append(f"lease lost on job {lease.job_id}: {job}")
            return
    stream.completed.append((lease, time.monotonic()))


def retrying(stream: Stream, what: str, store: Store, make_op: Callable[[], Op[T]]) -> T:
    """Run a fresh plan until it succeeds, as a client would; give up after a while."""
    deadline = time.monotonic() + RETRY_FOR_SECONDS
    while True:
        try:
            return plan.run(store, make_op())
        except errors.StatementError:
            raise  # a definite refusal: resending cannot help
        except errors.StoreError as exc:
            stream.store_errors.append((what, f"{type(exc).__name__}: {exc}", time.monotonic()))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def finish_orphaned_claims(store: Store, queue: str) -> set[int]:
    """Run the jobs whose claim landed but whose answer was lost; return their ids.

    Nobody knows their lease token, so only expiry gives them back: move the
    store's clock past their leases, requeue, and claim and complete them.
    """
    running = [row for row in job_rows(store, queue).values() if row["state"] == JobState.RUNNING]
    if not running:
        return set()
    later = max(float(row["lease_until"]) for row in running) + 1.0
    requeued = plan.run(store, job_requeue_expired(now=later))
    orphans = {int(row["id"]) for row in running}
    assert orphans <= set(requeued.requeued)
    claimed = plan.run(
        store,
        job_claim("drainer", [queue], limit=len(orphans), lease_seconds=LEASE_SECONDS, now=later),
    )
    assert {job.lease.job_id for job in claimed} == orphans
    for job in claimed:
        assert plan.run(store, report_one(completed(job.lease, "ok"), now=later)) is (
            Fenced.ACCEPTED
        )
    return orphans


def check_store(store: Store, queue: str, stream: Stream, orphans: set[int]) -> None:
    jobs = job_rows(store, queue)
    executions = execution_rows(store, queue)

    # Exactly one job per key, and it is the job the stream was told about.
    assert {row["idempotency_key"]: job_id for job_id, row in jobs.items()} == {
        key: job_id for key, (job_id, _) in stream.acked.items()
    }
    assert len(jobs) == len(stream.acked), "a resent enqueue made a second job"

    # Every job ran to success, once, by the consumer, under one lease at a time.
    consumer_claims = Counter(lease.job_id for lease, _, _ in stream.claims)
    assert max(consumer_claims.values()) == 1, "the consumer was handed a job twice"
    assert all(attempt == 1 for _, attempt, _ in stream.claims)
    assert set(consumer_claims) | orphans == set(jobs)
    token_of = {lease.job_id: lease.token for lease, _, _ in stream.claims}
    by_job: dict[int, list[dict[str, Any]]] = {job_id: [] for job_id in jobs}
    for execution in executions:
        by_job[int(execution["job_id"])].append(execution)
    for job_id, row in jobs.items():
        attempts = by_job[job_id]
        assert row["state"] == JobState.SUCCEEDED
        assert row["attempts"] == len(attempts), "an attempt without its execution, or more"
        for earlier, later in itertools.pairwise(attempts):
            assert earlier["outcome"] == "lease_expired"
            assert earlier["finished_at"] <= later["started_at"], "two attempts overlapped"
        if job_id in orphans:
            assert row["attempts"] == 2
        else:
            assert row["attempts"] == 1
            assert row["lease_token"] == token_of[job_id]


def report_stall(stream: Stream, killed: str) -> None:
    assert stream.killed_at is not None
    acked_after = sorted(stream.after_kill([at for _, at in stream.acked.values()]))
    completed_after = sorted(stream.after_kill([at for _, at in stream.completed]))
    claimed_after = sorted(stream.after_kill([at for _, _, at in stream.claims]))
    assert acked_after, "no enqueue was acknowledged after the kill"
    assert claimed_after, "no job was claimed after the kill"
    assert completed_after, "no job was completed after the kill"
    surfaced = [(what, message) for what, message, _ in stream.store_errors]
    print(
        f"\nSIGKILL of leader {killed}: first enqueue acknowledged "
        f"{acked_after[0] - stream.killed_at:.2f} s later, first claim "
        f"{claimed_after[0] - stream.killed_at:.2f} s later, first completion "
        f"{completed_after[0] - stream.killed_at:.2f} s later; "
        f"{len(surfaced)} store errors reached the callers"
        + "".join(f"\n  {what}: {message[:160]}" for what, message in surfaced)
    )
