"""Running claimed jobs: one task per slot, each running its jobs in turn in its own sandbox.

A job costs no task of its own. A slot waits for a claimed job, hands it to
its sandbox and, once it ends, hands its outcome to the completer and takes
the next. While jobs are short, a busy slot hands its pool child a few at
once (up to ``child_queue``): the child goes from one to the next without a
round trip to the slot in between. A job claimed ahead that no slot started
within ``HAND_BACK_SECONDS``, waiting for a slot or in a child behind a job
that runs long, is handed back without using an attempt, for another worker.
"""

from __future__ import annotations

import collections
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeAlias

import anyio
import anyio.abc

from taskq import errors
from taskq.broker.ops.workers import job_served_elsewhere
from taskq.broker.records import ClaimedJob
from taskq.job_context import JobUpdate
from taskq.worker import lowered_limits
from taskq.worker.autoscale import Autoscaler
from taskq.worker.completer import Completer
from taskq.worker.events import EventLog
from taskq.worker.output_flusher import OutputFlusher
from taskq.worker.parent_results import with_parents
from taskq.worker.prefetch import HAND_BACK_SECONDS
from taskq.worker.progress_forwarding import forward_progress
from taskq.worker.running import RunningJob, StopReason
from taskq.worker.sandbox.outcome import Outcome, Status, stopped_before_start
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import Sandbox, StartedJob
from taskq.worker.settings import WorkerSettings
from taskq.worker.slot_sandboxes import SlotSandboxes
from taskq.worker.slots import Slots
from taskq.worker.spawn_names import SpawnNames
from taskq.worker.store_runner import Run
from taskq.worker.waiting import first_of

# A slot's jobs handed to its sandbox, with what the sandbox made of each.
_Taken: TypeAlias = collections.deque[tuple[RunningJob, StartedJob | Outcome]]


class Executor:
    """The slots of a worker: each runs the claimed jobs it takes, one after another."""

    def __init__(
        self,
        run: Run,
        *,
        worker_id: str,
        settings: WorkerSettings,
        slots: Slots,
        sandboxes: SlotSandboxes,
        preparer: JobPreparer,
        completer: Completer,
        spawn_names: SpawnNames,
        output: OutputFlusher,
        autoscaler: Autoscaler | None,
        events: EventLog,
        draining: anyio.Event,
    ) -> None:
        self._run = run
        self._worker_id = worker_id
        self._settings = settings
        self._slots = slots
        self._sandboxes = sandboxes
        self._preparer = preparer
        self._completer = completer
        self._spawn_names = spawn_names
        self._output = output
        self._autoscaler = autoscaler
        self._events = events
        self._draining = draining
        # While the slots run (see ``slots_running``): the task group of the
        # slots, and that of the worker's loops, where progress forwarders run.
        self._slot_tasks: anyio.abc.TaskGroup | None = None
        self._loops: anyio.abc.TaskGroup | None = None
        # Each slot's jobs handed to its sandbox: the first runs, the rest wait in its child.
        self._taken_by_slots: list[tuple[_Taken, Sandbox]] = []

    @asynccontextmanager
    async def slots_running(self, loops: anyio.abc.TaskGroup) -> AsyncIterator[None]:
        """Run the slots while in the block; stop them (jobs and all) when it ends.

        ``loops`` runs the progress forwarders: they outlive the slots, to
        send what a job said before it was stopped.
        """
        async with anyio.create_task_group() as slot_tasks:
            self._slot_tasks = slot_tasks
            self._loops = loops
            for sandbox in self._sandboxes.in_use:
                slot_tasks.start_soon(self._slot, sandbox)
            yield
            slot_tasks.cancel_scope.cancel()

    async def add_slots(self, count: int) -> bool:
        """Start ``count`` slots, their pool children first; False if a child could not start."""
        try:
            sandboxes = await self._sandboxes.made_ready(count)
        except Exception as exc:
            # A child that cannot start (out of memory, say): the worker goes on as it is.
            self._events.emit("slots_not_added", worker=self._worker_id, error=repr(exc)[:200])
            return False
        if self._draining.is_set() or self._slot_tasks is None:
            await self._sandboxes.close_unused(sandboxes)
            return False
        self._sandboxes.in_use.extend(sandboxes)
        self._slots.add(count)
        for sandbox in sandboxes:
            self._slot_tasks.start_soon(self._slot, sandbox)
        return True

    async def hand_back_overdue(self, stopped: anyio.Event) -> None:
        """Hand back the jobs claimed ahead that waited past ``HAND_BACK_SECONDS``: for
        a slot, or in a slot's pool child behind a job that runs long.

        Looked at twice a bound, so none waits more than one and a half. A
        drain hands back every job claimed ahead by itself.
        """
        while not stopped.is_set():
            if not self._slots.held and not self._taken_by_slots:
                # No job held, none can wait: an idle worker's loop sleeps until one is
                # (a look four times a second was half of an idle worker's CPU).
                await first_of(stopped, self._slots.next_hold())
                continue
            with anyio.move_on_after(HAND_BACK_SECONDS / 2):
                await stopped.wait()
            if self._draining.is_set():
                continue
            for running in self._slots.take_overdue():
                running.stop(StopReason.HAND_BACK)
                self._completer.report(running, stopped_before_start())
            since = time.monotonic() - HAND_BACK_SECONDS
            for taken, sandbox in list(self._taken_by_slots):
                # The first is running; the rest wait in its child behind it.
                for entry in list(taken)[1:]:
                    if entry[0].claimed < since:
                        await self._hand_back_queued(entry, taken, sandbox)

    async def _slot(self, sandbox: Sandbox) -> None:
        """Run claimed jobs one after another in ``sandbox``, until cancelled.

        While jobs are short and more wait than the idle slots will take, the
        slot hands its pool child a few at once (see ``_may_queue``): the
        child then goes from one to the next without a round trip to this
        loop in between. A finished job's report is handed to the completer and
        the slot moves on: the job stays held (``Slots.held``) until the store
        has answered.
        """
        with self._slots.starting():
            await self._sandboxes.ready(sandbox)
        taken: _Taken = collections.deque()
        self._taken_by_slots.append((taken, sandbox))
        try:
            while True:
                if not taken:
                    self._slots.slot_free(sandbox)
                    if self._autoscaler is None:
                        next_job: RunningJob | None = await self._slots.next_waiting()
                    else:
                        next_job = await self._autoscaler.next_job_or_leave()
                    if next_job is None:
                        await self._sandboxes.slot_left(sandbox)
                        return
                    taken.append((next_job, await self._start_job(next_job, sandbox)))
                # Topped up once half its queue is run, not after every job:
                # each frame that finds the child idle wakes it, at a cost.
                refill = len(taken) <= self._settings.child_queue // 2
                while refill and self._may_queue(sandbox, len(taken)):
                    running = self._slots.take_waiting()
                    running.queued = True
                    taken.append((running, await self._start_job(running, sandbox)))
                running, started = taken[0]
                self._slots.slot_running(sandbox, running.started)
                outcome = await self._finish_job(running, sandbox, started)
                taken.popleft()
                if taken:
                    taken[0][0].queued = False
                    taken[0][0].started = time.monotonic()
                self._completer.report(running, outcome)
        except BaseException:
            for running, _ in taken:
                self._slots.release(running)
            raise
        finally:
            self._slots.slot_free(sandbox)
            self._taken_by_slots.remove((taken, sandbox))

    async def _hand_back_queued(
        self, entry: tuple[RunningJob, StartedJob | Outcome], taken: _Taken, sandbox: Sandbox
    ) -> None:
        """Report a job queued in a slot's child behind another now, unless it may yet
        start there: only one the child is certain never to start is handed back
        (``Sandbox.withdraw``), for another worker may run it at once."""
        running, started = entry
        if isinstance(started, StartedJob):
            if not sandbox.withdraw(started):
                return
            running.stop(StopReason.HAND_BACK)
        # An outcome known without running (a refusal, say) need not wait its turn either.
        taken.remove(entry)
        self._completer.report(running, await self._finish_job(running, sandbox, started))

    def _may_queue(self, sandbox: Sandbox, taken: int) -> bool:
        """Whether the slot should take another job now, behind the ``taken`` ones it has.

        Only while jobs are short (they are claimed ahead then), only as many
        as ``child_queue`` allows, and only jobs no idle slot is about to take:
        a job queued behind a long one would wait for it.
        """
        return (
            taken < self._settings.child_queue
            and self._slots.more_than_idle_slots_take()
            and not self._draining.is_set()
            and sandbox.can_queue()
        )

    async def _start_job(self, running: RunningJob, sandbox: Sandbox) -> StartedJob | Outcome:
        """Hand the job to ``sandbox``; or its outcome, when it is not to run."""
        job = running.job
        if self._draining.is_set() and not running.cancel.is_set():
            # Claimed ahead, not started: another worker may run it now.
            running.stop(StopReason.DRAIN)
        running.started = time.monotonic()
        self._events.emit(
            "job_started",
            job=job.lease.job_id,
            queue=job.queue,
            attempt=f"{job.attempt}/{job.max_attempts}",
            target=job.payload.get("target") or job.kind.value,
        )
        self._slots.entered_slot()
        if running.cancel.is_set():
            # Stopped while it waited for its slot: never started, so handed back as it is.
            return stopped_before_start()
        request = self._preparer.prepare(job)
        if isinstance(request, Outcome):
            if request.status is Status.POLICY and await self._served_elsewhere(job):
                running.stop(StopReason.SERVED_ELSEWHERE)
            return request
        if request.asked is not None:
            self._events.emit(
                "limits_lowered",
                job=job.lease.job_id,
                lowered=lowered_limits.described(
                    lowered_limits.lowered(request.asked, request.limits)
                ),
                hint=lowered_limits.LOWERED_HINT,
            )
        if job.parent_count:
            request = await with_parents(request, running, self._run)
            if isinstance(request, Outcome):
                return request

        def on_progress(update: JobUpdate) -> None:
            running.progress = update
            if update.checkpoint_json is not None:
                running.checkpoint_json = update.checkpoint_json
            if running.progress_changed is None:
                # The first report: only now does this job need a task to forward them.
                running.progress_changed = anyio.Event()
                assert self._loops is not None, "jobs run only while the slots run"
                self._loops.start_soon(forward_progress, running, self._run)
            running.progress_changed.set()

        try:
            return await sandbox.start(
                request,
                cancel=running.cancel,
                on_progress=on_progress,
                on_output=self._output.collector(running),
            )
        except BaseException:
            self._slots.left_slot()
            running.drop_parents_file()
            raise

    async def _served_elsewhere(self, job: ClaimedJob) -> bool:
        """Whether another live worker of the job's queue may run it.

        Workers of one queue may run under different policies (``--modules``,
        ``--allow-shell``, ``--allow-python-exec``): a job refused here then
        goes back for one whose policy allows it, rather than ending failed. A
        job no other live worker of the queue may run (``os:system``, a shell
        command where none allows shell) fails as before, rather than come
        back here again and again; so does one when the store cannot say.
        """
        try:
            served: bool = await self._run(job_served_elsewhere(job, worker_id=self._worker_id))
        except errors.StoreError:
            return False
        return served

    async def _finish_job(
        self, running: RunningJob, sandbox: Sandbox, started: StartedJob | Outcome
    ) -> Outcome:
        try:
            if isinstance(started, Outcome):
                outcome = started
            else:
                outcome = await sandbox.finish(started)
                if started.request.asked is not None:
                    asked, applied = started.request.asked, started.request.limits
                    outcome = lowered_limits.told(outcome, lowered_limits.lowered(asked, applied))
        finally:
            self._slots.left_slot()
            running.drop_parents_file()
            running.ended = True
            if running.progress_changed is not None:
                running.progress_changed.set()  # lets the forwarder see the job is over
        # A stopped job's time says nothing of the others.
        if running.stopped_because is None and outcome.wall_seconds > 0:
            self._slots.prefetch.job_ran(outcome.wall_seconds)
        if outcome.spawn is not None:
            # Its child has no store: what it spawned is resolved and checked here,
            # before its report is made (see spawn_names). Every other outcome goes as it is.
            outcome = await self._spawn_names.checked(outcome, running.job.lease)
        return outcome
