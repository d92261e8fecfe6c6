"""A worker's execution slots: the jobs it holds, and how many more it may claim.

A job is held from its claim until the store has its report. Claimed, it
waits for a slot; a slot takes it and runs it in the slot's sandbox, then
hands its report to the batcher and takes the next. Claims ask for as many
jobs as there are free slots, plus a few while jobs are short (see
``prefetch``), less the slots already promised to a claim in flight, so two
claims never fill the same slot. A slot whose job has run longer than
``HAND_BACK_SECONDS`` gets nothing claimed ahead for it, and a job claimed
ahead that waited that long for a slot is taken out for handing back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

from taskq.worker.prefetch import HAND_BACK_SECONDS, Prefetch
from taskq.worker.running import RunningJob


class Slots:
    """The counts a worker's loops share about its slots, and the wake-up when they change."""

    def __init__(
        self, count: int, prefetch: Prefetch, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.count = count
        self.prefetch = prefetch
        self._clock = clock
        self.held: dict[int, RunningJob] = {}
        """Every job held, by id: claimed and not yet reported."""
        # Claimed jobs wait here for a slot; a slot whose job is still being
        # reported takes the next one as soon as the store has answered.
        self._waiting: asyncio.Queue[RunningJob] = asyncio.Queue()
        self._promised = 0
        # Jobs handed to their slot: each will report soon.
        self._executing = 0
        # Slots waiting for a claimed job: the jobs they will take are not to be queued.
        self._idle = 0
        # Slots waiting for their pool child to start (``SlotSandboxes.ready``).
        self._starting = 0
        # When each busy slot's job started, by slot: read on every claim, so kept
        # apart from the held jobs, which may be hundreds.
        self._running_since: dict[object, float] = {}
        self._changed = anyio.Event()
        self._on_wake: Callable[[], object] | None = None
        # Set by the next hold, while a loop waits for one (``next_hold``).
        self._next_hold: anyio.Event | None = None

    # -- claiming

    def to_claim(self) -> int:
        """Jobs to claim now: free slots, plus those claimed ahead while jobs are short."""
        return self.count + self.ahead() - len(self.held) - self._promised

    def ahead(self) -> int:
        """Jobs to hold beyond the slots: what the slots not tied up by a long job start soon."""
        return self.prefetch.ahead(self.count - self.long_running())

    def long_running(self) -> int:
        """Slots whose job has run longer than ``HAND_BACK_SECONDS``."""
        since = self._clock() - HAND_BACK_SECONDS
        return sum(1 for started in self._running_since.values() if started < since)

    def slot_running(self, slot: object, started: float) -> None:
        """``slot`` runs a job that started at ``started`` (monotonic)."""
        self._running_since[slot] = started

    def slot_free(self, slot: object) -> None:
        """``slot`` runs no job now."""
        self._running_since.pop(slot, None)

    def take_overdue(self) -> list[RunningJob]:
        """Take out the jobs that waited for a slot longer than ``HAND_BACK_SECONDS``, to hand back.

        The others keep their order. The oldest, one for each slot still
        starting its child, are not claimed ahead but claimed for those slots:
        they stay.
        """
        since = self._clock() - HAND_BACK_SECONDS
        kept: list[RunningJob] = []
        overdue: list[RunningJob] = []
        for_starting_slots = self._starting
        while not self._waiting.empty():
            running = self._waiting.get_nowait()
            if for_starting_slots:
                for_starting_slots -= 1
                kept.append(running)
                continue
            (overdue if running.claimed < since else kept).append(running)
        for running in kept:
            self._waiting.put_nowait(running)
        return overdue

    @contextmanager
    def starting(self) -> Iterator[None]:
        """A slot waits for its pool child to start while in the block."""
        self._starting += 1
        try:
            yield
        finally:
            self._starting -= 1

    @contextmanager
    def promised(self, jobs: int) -> Iterator[None]:
        """Keep ``jobs`` slots for the claim in flight while in the block."""
        self._promised += jobs
        try:
            yield
        finally:
            self._promised -= jobs

    def hold(self, running: RunningJob) -> None:
        """A job was claimed: it waits for a slot."""
        self.held[running.job.lease.job_id] = running
        self._waiting.put_nowait(running)
        if self._next_hold is not None:
            self._next_hold.set()
            self._next_hold = None

    def next_hold(self) -> anyio.Event:
        """An event the next :meth:`hold` sets."""
        if self._next_hold is None:
            self._next_hold = anyio.Event()
        return self._next_hold

    def release(self, running: RunningJob) -> None:
        """The store has the job's report (or the job was dropped): it is no longer held."""
        # The same job may be held again already, claimed by the very request
        # that reported this attempt: only this attempt leaves.
        if self.held.get(running.job.lease.job_id) is running:
            del self.held[running.job.lease.job_id]
        # Most slots are refilled by the claim that rode with their report:
        # wake the claimer (or a drain) only when there is something to do.
        if not self.held or self.to_claim() > 0:
            self.wake()

    # -- growing and shrinking (see taskq.worker.autoscale)

    def add(self, slots: int) -> None:
        """``slots`` more slots are ready to take jobs."""
        self.count += slots
        self.prefetch.slots = self.count
        self.wake()

    def leave(self, least: int) -> bool:
        """Whether an idle slot may go: more than ``least`` slots, and no job waiting for one.

        True once the count has been lowered for it: the slot must then stop taking jobs.
        """
        if self.count <= least or self._waiting.qsize():
            return False
        self.count -= 1
        self.prefetch.slots = self.count
        return True

    def idle(self) -> int:
        """Slots waiting for a claimed job."""
        return self._idle

    def waiting(self) -> int:
        """Claimed jobs waiting for a slot."""
        return self._waiting.qsize()

    # -- the slots' side

    async def next_waiting(self) -> RunningJob:
        """Wait for a claimed job, as an idle slot."""
        self._idle += 1
        try:
            return await self._waiting.get()
        finally:
            self._idle -= 1

    def more_than_idle_slots_take(self) -> bool:
        """Whether a busy slot may queue a waiting job: jobs are short, no idle slot needs it."""
        return self.ahead() > 0 and self._waiting.qsize() > self._idle

    def take_waiting(self) -> RunningJob:
        """A waiting job, for a busy slot to queue (see ``more_than_idle_slots_take``)."""
        return self._waiting.get_nowait()

    def entered_slot(self) -> None:
        """A slot took a job: it will report soon."""
        self._executing += 1

    def left_slot(self) -> None:
        """A slot's job is over (its report is on its way)."""
        self._executing -= 1

    def may_report(self) -> int:
        """How many held jobs may yet send a report: those in slots, and those waiting for one."""
        return self._executing + self._waiting.qsize()

    def held_jobs_slack(self) -> float | None:
        """How long the jobs held keep the slots busy past a round trip (``Prefetch.slack``)."""
        return self.prefetch.slack(self.may_report())

    def busy(self) -> int:
        """Slots in use: their jobs, less those queued in a pool child behind another."""
        return self._executing - sum(running.queued for running in self.held.values())

    # -- waking the claimer and the drain

    def wake(self) -> None:
        """Something changed: a slot freed, or the worker began to drain."""
        self._changed.set()
        if self._on_wake is not None:
            self._on_wake()

    def next_change(self) -> anyio.Event:
        """An event the next ``wake`` sets (take it before looking, so no wake is missed)."""
        self._changed = anyio.Event()
        return self._changed

    @contextmanager
    def waking(self, call: Callable[[], object]) -> Iterator[None]:
        """While in the block, each ``wake`` also calls ``call``: it ends the claimer's pause
        without a task of its own waiting beside it for the event."""
        self._on_wake = call
        try:
            yield
        finally:
            self._on_wake = None
