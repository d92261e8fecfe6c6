"""A worker's claims riding with its reports, against a real store.

While a worker claims ahead, a claim in flight may have been promised every
slot before a report could release anything. A report of a job with
children still claims one job then: the job it releases in the worker's own
queue comes back in the same write, rather than waiting for a claim of its
own.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim, job_claimable_then
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.leases import Report, job_report
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import ClaimedJob, Fenced, JobState, Lease, WorkflowSubmission
from taskq.broker.stores import look_turns
from taskq.broker.stores.look_turns import LookTurns
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Statement, StatementResult, Store
from taskq.worker.claim_requests import ClaimRequests
from taskq.worker.events import EventLog
from taskq.worker.heartbeat import Heartbeat, LeaseHolder
from taskq.worker.prefetch import Prefetch
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import Run, here_runner, look_runner, store_runner
from tests.support.delegating_store import DelegatingStore
from tests.support.reports import completed, released

pytestmark = pytest.mark.anyio

T = TypeVar("T")
# A bound on each wait for a condition: reached only when the behaviour is wrong.
_BOUND = 10.0


def _claims(
    store: Store, queue: str, look: Run | None = None, *, here: Run | None = None, slots: int = 1
) -> tuple[ClaimRequests, Slots]:
    settings = WorkerSettings(queues=(queue,))
    held = Slots(slots, Prefetch(slots=slots, most=0))
    deadline = LeaseDeadline(
        lease_seconds=settings.lease_seconds, margin_seconds=settings.lease_margin_seconds
    )
    holder = LeaseHolder(
        run=store_runner(store), worker_id="w1", settings=settings, slots=held, deadline=deadline
    )
    events = EventLog()
    draining = anyio.Event()
    outage = StoreOutage(events, "w1")
    heartbeat = Heartbeat(holder, outage=outage, events=events, maintainer=None, draining=draining)
    claims = ClaimRequests(holder, heartbeat=heartbeat, draining=draining, look=look, here=here)
    return claims, held


def _submit_pairs(store: Store, queue: str, *, chained: bool) -> tuple[int, int]:
    submission = WorkflowSubmission(
        jobs=(
            call_spec("tests.support.jobs:echo", ["first"], queue=queue),
            call_spec("tests.support.jobs:echo", ["second"], queue=queue),
        ),
        parents=((), (0,) if chained else ()),
    )
    first, second = plan.run(store, workflow_submit(submission)).job_ids
    return first, second


async def _report_with_every_slot_promised(
    store: Store, *, chained: bool, report: Callable[[Lease], Report]
) -> tuple[Slots, int, int]:
    """Claim the first of a pair (the second its child if ``chained``), then send
    ``report`` of it while a claim sent earlier holds every slot there is, and more;
    the slots, and the pair's ids."""
    queue = f"claims-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(store, queue)
    first, second = _submit_pairs(store, queue, chained=chained)
    _, took = await claims.report_and_claim([], 1, time.monotonic())
    assert (took, list(slots.held)) == (1, [first])
    parent = slots.held[first]
    assert parent.job.has_children is chained
    with slots.promised(slots.to_claim() + 3):
        [verdict] = await claims.send_reports([report(parent.job.lease)])
    assert verdict.value == "accepted"
    return slots, first, second


@pytest.mark.parametrize("chained", [True, False])
async def test_a_report_that_may_release_a_job_claims_one_even_with_every_slot_promised(
    store: Store, chained: bool
) -> None:
    slots, _, second = await _report_with_every_slot_promised(
        store, chained=chained, report=lambda lease: completed(lease, "done")
    )
    if chained:
        assert second in slots.held, "the job the report released came back with it"
    else:
        # Nothing a plain report frees: it claims nothing beyond what its slots allow.
        assert second not in slots.held


async def test_a_job_with_children_handed_back_is_not_claimed_again_beyond_the_slots(
    store: Store,
) -> None:
    # A job claimed ahead, handed back because no slot started it in time: its children
    # still wait for it, so its report frees nothing to claim beyond the slots. Were it
    # counted, the claim would take the job just handed back, again and again.
    _, first, _ = await _report_with_every_slot_promised(store, chained=True, report=released)
    job = plan.run(store, job_get(first))
    assert job is not None
    assert job.state is JobState.QUEUED, "the job handed back came back in the same write"


class _CountingWrites(DelegatingStore):
    writes = 0

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        self.writes += 1
        return await super().execute_async(statements, idempotent=idempotent)


async def test_an_idle_look_writes_only_when_a_job_waits(store: Store) -> None:
    queue = f"look-{uuid.uuid4().hex[:8]}"
    counted = _CountingWrites(store)
    claims, slots = _claims(counted, queue, look=look_runner(counted, holding=lambda: False))
    assert await claims.claim_if_claimable(1, time.monotonic()) == 0
    assert counted.writes == 0, "a look that finds nothing sends no claim"
    first, _ = _submit_pairs(store, queue, chained=True)
    assert await claims.claim_if_claimable(1, time.monotonic()) == 1
    assert (counted.writes, list(slots.held)) == (1, [first])
    # The second job waits on the first: nothing to claim, nothing written.
    assert await claims.claim_if_claimable(1, time.monotonic()) == 0
    assert counted.writes == 1


@pytest.fixture
def turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LookTurns, LookTurns]]:
    """Another idle worker's turns and ours, on one folder; a turn is waited for up to a minute."""
    monkeypatch.setattr(look_turns, "_LONGEST_WAIT_SECONDS", 60.0)
    others, ours = LookTurns(tmp_path), LookTurns(tmp_path)
    try:
        yield others, ours
    finally:
        others.close()
        ours.close()


async def test_a_look_that_finds_nothing_takes_no_turn(
    store: Store, turns: tuple[LookTurns, LookTurns]
) -> None:
    """Another worker's look holding the turn does not hold up one with nothing to claim."""
    others, ours = turns
    look = look_runner(store, holding=lambda: False)
    claims, _ = _claims(store, f"turn-{uuid.uuid4().hex[:8]}", look=look)
    with others.turn_if_free() as held, anyio.fail_after(_BOUND):
        assert held
        assert await claims.claim_if_claimable(1, time.monotonic(), turns=ours) == 0


async def test_a_look_that_finds_work_claims_once_another_gives_the_turn_back(
    store: Store, turns: tuple[LookTurns, LookTurns]
) -> None:
    others, ours = turns
    queue = f"turn-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(store, queue, look=look_runner(store, holding=lambda: False))
    [job_id] = plan.run(
        store, job_enqueue([call_spec("tests.support.jobs:echo", [1], queue=queue)])
    )
    took: list[int] = []

    async def look() -> None:
        took.append(await claims.claim_if_claimable(1, time.monotonic(), turns=ours))

    with anyio.fail_after(_BOUND):
        async with anyio.create_task_group() as tasks:
            with others.turn_if_free() as held:
                assert held
                tasks.start_soon(look)
                await anyio.sleep(0.05)  # the look has read, and waits for the turn
                assert (took, list(slots.held)) == ([], []), "no claim without the turn"
    assert (took, list(slots.held)) == ([1], [job_id])


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[SqliteStore]:
    store = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    assert isinstance(store, SqliteStore)
    try:
        yield store
    finally:
        store.close()


def _traced(op: Op[T], threads: list[int]) -> Op[T]:
    """``op``, noting the thread that drives it at every step: a plan's code runs there."""
    step = next(op)
    while True:
        threads.append(threading.get_ident())
        answer = yield step
        try:
            step = op.send(answer)
        except StopIteration as done:
            threads.append(threading.get_ident())
            result: T = done.value
            return result


def _one_queued(store: Store) -> Op[list[ClaimedJob] | None]:
    """A look for the one job queued in a new queue."""
    queue = f"look-{uuid.uuid4().hex[:8]}"
    plan.run(store, job_enqueue([call_spec("tests.support.jobs:echo", [1], queue=queue)]))
    return job_claimable_then([queue], job_claim("w1", [queue], limit=1, lease_seconds=30))


async def test_a_busy_workers_look_on_the_embedded_store_goes_to_its_thread_once(
    embedded: SqliteStore,
) -> None:
    """While the worker holds jobs, the read and the claim of a look run in one worker
    thread, not each in a trip of its own.

    The embedded store's alone: a cluster's look is two requests over async HTTP.
    """
    threads: list[int] = []
    claimed = await look_runner(embedded, holding=lambda: True)(
        _traced(_one_queued(embedded), threads)
    )
    assert claimed is not None
    assert len(claimed) == 1
    assert len(threads) == 3  # the read, the claim, the answer
    assert len(set(threads)) == 1
    assert threads[0] != threading.get_ident()


async def test_the_look_of_a_worker_holding_no_job_runs_on_its_loop(
    embedded: SqliteStore,
) -> None:
    threads: list[int] = []
    claimed = await look_runner(embedded, holding=lambda: False)(
        _traced(_one_queued(embedded), threads)
    )
    assert claimed is not None
    assert len(claimed) == 1
    assert threads == [threading.get_ident()] * 3


async def test_a_look_on_the_loop_leaves_a_write_that_must_wait_to_a_thread(
    embedded: SqliteStore,
) -> None:
    """Another process's write lock held: the claim waits in a thread, the loop runs on."""
    look = _one_queued(embedded)
    other = sqlite3.connect(embedded.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        done = anyio.Event()
        claimed: list[ClaimedJob] | None = None

        async def run_look() -> None:
            nonlocal claimed
            claimed = await look_runner(embedded, holding=lambda: False)(look)
            done.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run_look)
            # The loop still runs this task while the claim waits for the lock.
            ticks = 0
            while ticks < 5:
                await anyio.sleep(0.01)
                ticks += 1
            assert not done.is_set(), "the claim was made while another held the write lock"
            other.execute("COMMIT")
            with anyio.fail_after(_BOUND):
                await done.wait()
    finally:
        other.close()
    assert claimed is not None
    assert len(claimed) == 1


class _NotingThreads(SqliteStore):
    """The embedded store, noting the thread of each write it makes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.write_threads: list[int] = []

    def _run_and_commit(self, statements: Sequence[Statement]) -> list[StatementResult]:
        self.write_threads.append(threading.get_ident())
        return super()._run_and_commit(statements)


@pytest.fixture
def noting(embedded: SqliteStore) -> Iterator[_NotingThreads]:
    """The ``embedded`` store's file (migrated), opened by a store that notes its writes'
    threads."""
    store = _NotingThreads(embedded.path)
    try:
        yield store
    finally:
        store.close()


async def test_a_report_of_every_job_the_worker_holds_is_written_from_its_loop(
    noting: _NotingThreads,
) -> None:
    """Nothing else held, the loop has nothing else to do: no trip to a thread and back."""
    queue = f"here-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(noting, queue, here=here_runner(noting))
    first, _ = _submit_pairs(noting, queue, chained=False)
    _, took = await claims.report_and_claim([], 1, time.monotonic())
    assert (took, list(slots.held)) == (1, [first])
    noting.write_threads.clear()
    [verdict] = await claims.send_reports([completed(slots.held[first].job.lease, "done")])
    assert verdict is Fenced.ACCEPTED
    assert noting.write_threads == [threading.get_ident()]


async def test_a_report_while_another_job_is_held_is_written_from_a_thread(
    noting: _NotingThreads,
) -> None:
    """Another job held: its start or its end must not wait behind this write's fsync."""
    queue = f"here-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(noting, queue, here=here_runner(noting), slots=2)
    first, second = _submit_pairs(noting, queue, chained=False)
    _, took = await claims.report_and_claim([], 2, time.monotonic())
    assert (took, sorted(slots.held)) == (2, sorted([first, second]))
    noting.write_threads.clear()
    [verdict] = await claims.send_reports([completed(slots.held[first].job.lease, "done")])
    assert verdict is Fenced.ACCEPTED
    assert len(noting.write_threads) == 1
    assert noting.write_threads[0] != threading.get_ident()


def _queued_child(store: Store, queue: str) -> int:
    """A parent and its child in ``queue``, the parent run and ended: the child's id."""
    parent, child = _submit_pairs(store, queue, chained=True)
    [claimed] = plan.run(store, job_claim("elsewhere", [queue], limit=1, lease_seconds=60))
    assert claimed.lease.job_id == parent
    plan.run(store, job_report([completed(claimed.lease, "parent's result")]))
    return child


async def test_claims_bring_parents_outcomes_once_jobs_with_parents_come(store: Store) -> None:
    """The clause is left out of a worker's claims until a job with parents comes to it."""
    queue = f"parents-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(store, queue)
    first = _queued_child(store, queue)
    _, took = await claims.report_and_claim([], 1, time.monotonic())
    assert took == 1
    # The first such job reads its parents' outcomes itself: none came with the claim.
    met = slots.held[first].job
    assert (met.parent_count, met.first_parents) == (1, None)
    slots.release(slots.held[first])
    second = _queued_child(store, queue)
    _, took = await claims.report_and_claim([], 1, time.monotonic())
    assert took == 1
    [outcome] = slots.held[second].job.first_parents or ()
    assert outcome.result == "parent's result"


async def test_a_report_that_may_release_a_job_claims_it_with_its_parents_outcomes(
    store: Store,
) -> None:
    queue = f"parents-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(store, queue)
    first, second = _submit_pairs(store, queue, chained=True)
    await claims.report_and_claim([], 1, time.monotonic())
    [verdict] = await claims.send_reports([completed(slots.held[first].job.lease, "first's")])
    assert verdict.value == "accepted"
    [outcome] = slots.held[second].job.first_parents or ()
    assert outcome.result == "first's"
