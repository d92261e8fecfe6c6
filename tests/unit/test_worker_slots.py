"""A worker's slot bookkeeping: how many jobs to claim, and who waits for whom."""

from __future__ import annotations

import anyio
import pytest

from taskq.broker.records import ClaimedJob, Lease, PayloadKind
from taskq.worker.prefetch import HAND_BACK_SECONDS, Prefetch
from taskq.worker.running import RunningJob
from taskq.worker.slots import Slots

pytestmark = pytest.mark.anyio


def claimed(job_id: int, token: str = "t") -> RunningJob:
    job = ClaimedJob(Lease(job_id, token), PayloadKind.CALL, {}, "default", 1, 3, None, {}, 0.0)
    return RunningJob(job, renewed_at=0.0)


def test_a_claim_in_flight_keeps_its_slots_from_the_next() -> None:
    slots = Slots(4, Prefetch(slots=4, most=0))
    assert slots.to_claim() == 4
    with slots.promised(3):
        assert slots.to_claim() == 1
        slots.hold(claimed(1))
    assert slots.to_claim() == 3


def test_claiming_ahead_asks_for_more_than_the_free_slots() -> None:
    prefetch = Prefetch(slots=2, most=8)
    prefetch.job_ran(0.001)
    prefetch.round_took(0.01)
    assert Slots(2, prefetch).to_claim() == 2 + prefetch.jobs > 2


async def test_releasing_an_older_attempt_keeps_the_job_held_again() -> None:
    slots = Slots(1, Prefetch(slots=1, most=0))
    first, again = claimed(7, "first"), claimed(7, "again")
    slots.hold(first)
    slots.hold(again)
    changed = slots.next_change()
    slots.release(first)
    assert slots.held == {7: again}
    assert not changed.is_set()  # no slot is free: nothing for the claimer to do
    slots.release(again)
    assert changed.is_set()


async def test_the_next_job_held_sets_the_event_its_waiters_took() -> None:
    # The hand-back of jobs claimed ahead sleeps on it while the worker holds none.
    slots = Slots(1, Prefetch(slots=1, most=0))
    waiting = slots.next_hold()
    assert slots.next_hold() is waiting
    assert not waiting.is_set()
    slots.hold(claimed(1))
    assert waiting.is_set()
    assert not slots.next_hold().is_set()  # a new one, for the hold after


async def test_a_busy_slot_queues_only_what_the_idle_slots_will_not_take() -> None:
    prefetch = Prefetch(slots=1, most=4)
    prefetch.job_ran(0.001)
    prefetch.round_took(0.01)
    slots = Slots(1, prefetch)
    for job_id in (1, 2):
        slots.hold(claimed(job_id))
    assert (await slots.next_waiting()).job.lease.job_id == 1
    slots.entered_slot()
    assert slots.may_report() == 2
    assert slots.more_than_idle_slots_take()
    queued = slots.take_waiting()
    queued.queued = True
    slots.entered_slot()
    assert slots.busy() == 1
    assert not slots.more_than_idle_slots_take()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_slot_whose_job_runs_long_gets_nothing_claimed_ahead() -> None:
    prefetch = Prefetch(slots=2, most=1000)
    prefetch.job_ran(0.001)
    prefetch.round_took(0.01)
    clock = Clock()
    slots = Slots(2, prefetch, clock=clock)
    both = slots.ahead()
    assert both > 0
    slots.slot_running("a", clock.now)
    clock.now += HAND_BACK_SECONDS / 2
    assert slots.ahead() == both  # a job of its usual length, as far as anyone knows
    clock.now += HAND_BACK_SECONDS
    assert slots.long_running() == 1
    assert 0 < slots.ahead() < both  # only the other slot is counted on
    slots.slot_running("b", clock.now - 2 * HAND_BACK_SECONDS)
    assert slots.ahead() == 0
    slots.slot_free("a")
    assert slots.long_running() == 1


def test_jobs_waiting_past_the_bound_are_taken_out_to_hand_back_in_order() -> None:
    clock = Clock()
    slots = Slots(1, Prefetch(slots=1, most=4), clock=clock)
    early, late = claimed(1), claimed(2)
    early.claimed, late.claimed = clock.now, clock.now + HAND_BACK_SECONDS
    slots.hold(early)
    slots.hold(late)
    clock.now += HAND_BACK_SECONDS + 0.01
    assert slots.take_overdue() == [early]
    assert slots.take_waiting() is late


def test_the_oldest_jobs_wait_for_the_slots_still_starting_their_child() -> None:
    clock = Clock()
    slots = Slots(2, Prefetch(slots=2, most=4), clock=clock)
    first, ahead = claimed(1), claimed(2)
    first.claimed = ahead.claimed = clock.now
    slots.hold(first)
    slots.hold(ahead)
    clock.now += HAND_BACK_SECONDS + 0.01
    with slots.starting():
        # The first is the starting slot's, not claimed ahead: only the other goes back.
        assert slots.take_overdue() == [ahead]
        assert slots.take_waiting() is first


async def test_a_wake_ends_the_wait_of_whoever_is_waking() -> None:
    """The claimer's pause: a slot that frees (or a drain) ends it at once, whatever the
    store does meanwhile; a wake outside the block reaches no one."""
    slots = Slots(1, Prefetch(slots=1, most=0))
    slots.wake()  # nothing is waiting: nothing to call
    ended = False

    async def pause() -> None:
        nonlocal ended
        with anyio.CancelScope() as scope, slots.waking(scope.cancel):
            await anyio.sleep(3600)  # a store that never changes
        ended = True

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pause)
            await anyio.wait_all_tasks_blocked()
            slots.wake()
    assert ended
    slots.wake()  # the block is left: the scope is not called again
