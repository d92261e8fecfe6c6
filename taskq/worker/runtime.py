"""The worker: claims jobs for its free slots, runs them in sandboxes, reports, heartbeats.

One anyio task group holds the loops, and one task per slot runs that
slot's jobs one after another in the slot's own sandbox: a job costs no task
of its own. The claimer asks for as many jobs as there are free slots in one
request (and, while jobs are short, a few more: see ``prefetch``), and when
idle lets a cheap read decide whether a claim is worth a write; while busy,
claims ride along with the acknowledgements. A job claimed ahead that no
slot started within ``HAND_BACK_SECONDS`` (a long job stood in its way) is
handed back without using an attempt, for another worker. The heartbeat
extends every lease in one statement and stops any job whose lease is gone.
Reports are fenced by the lease: a result the store refuses is dropped, never
forced in. Draining stops claims, hands back jobs claimed ahead, gives running
jobs a grace period, then stops them and hands them back without using up an
attempt.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import time
import uuid
from functools import partial
from typing import Any, TypeAlias

import anyio
import anyio.abc

from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.leases import (
    ClaimRequest,
    Report,
    job_backlog,
    job_claimable,
    job_report,
    job_report_and_claim,
)
from taskq.broker.ops.maintenance import Maintainer
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workers import worker_register, worker_set_state
from taskq.broker.records import Fenced
from taskq.broker.stores.store import Store
from taskq.broker.stores.wake_hints import hint_address
from taskq.job_context import JobUpdate
from taskq.worker.acks import AckBatcher
from taskq.worker.autoscale import Autoscaler
from taskq.worker.cpus import format_cpu_list
from taskq.worker.events import EventLog
from taskq.worker.heartbeat import Heartbeat
from taskq.worker.prefetch import HAND_BACK_SECONDS, Prefetch
from taskq.worker.progress_forwarding import forward_progress
from taskq.worker.reports import report_of
from taskq.worker.running import RunningJob, StopReason
from taskq.worker.sandbox import cgroups
from taskq.worker.sandbox.child_process import ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.sandbox.outcome import Outcome, Status, stopped_before_start
from taskq.worker.sandbox.payloads import Policy
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import Sandbox, StartedJob
from taskq.worker.settings import WorkerSettings
from taskq.worker.slot_sandboxes import SlotSandboxes
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage

log = logging.getLogger("taskq.worker")

# Jobs tend to come in bursts: for a while after the last one, an idle worker
# looks again sooner. On rqlite, where looking is a read every poll, this is
# the pickup latency; a long-idle worker polls at the store's own pace.
_BUSY_POLL_SECONDS = 0.01
_BUSY_POLL_WINDOW_SECONDS = 1.0

# A slot's jobs handed to its sandbox, with what the sandbox made of each.
_Taken: TypeAlias = collections.deque[tuple[RunningJob, StartedJob | Outcome]]


def new_worker_id(settings: WorkerSettings) -> str:
    """A worker's id: its name, made unique."""
    return f"{settings.name}-{uuid.uuid4().hex[:8]}"


class Worker:
    """One worker process's jobs and loops, against one store."""

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        *,
        events: EventLog | None = None,
        worker_id: str | None = None,
        outage: StoreOutage | None = None,
    ) -> None:
        """``outage``: the one that opening the store told, so that an outage is told once."""
        self.store = store
        self.settings = settings
        self.events = events or EventLog()
        self.worker_id = worker_id or new_worker_id(settings)
        self.draining = anyio.Event()
        self.stopped = anyio.Event()
        self._slots = Slots(
            settings.min_slots,
            Prefetch(slots=settings.min_slots, most=settings.most_prefetch),
        )
        self._preparer = JobPreparer(
            policy=Policy(
                modules=settings.modules,
                allow_python_exec=settings.allow_python_exec,
                allow_shell=settings.allow_shell,
            ),
            worker_max=settings.max_limits,
        )
        self._deadline = LeaseDeadline(
            lease_seconds=settings.lease_seconds, margin_seconds=settings.lease_margin_seconds
        )
        self._cgroups = cgroups.create(os.getpid())
        setup = ChildSetup(
            env=job_environment(os.environ, settings.env_passthrough),
            deadline=self._deadline,
            cgroups=self._cgroups,
        )
        self._sandboxes = SlotSandboxes(settings, self._preparer, setup)
        self._autoscaler = (
            Autoscaler(
                slots=self._slots,
                least=settings.min_slots,
                most=settings.max_slots,
                interval=settings.autoscale_interval_seconds,
                idle_seconds=settings.autoscale_idle_seconds,
                events=self.events,
                worker_id=self.worker_id,
                # The store's count of slots follows at once.
                on_change=lambda: self._heartbeat.beat_soon(),
            )
            if settings.autoscale is not None
            else None
        )
        self._slot_tasks: anyio.abc.TaskGroup | None = None
        # Each slot's jobs handed to its sandbox: the first runs, the rest wait in its child.
        self._taken_by_slots: list[tuple[_Taken, Sandbox]] = []
        self._last_claimed = float("-inf")
        self._loops: anyio.abc.TaskGroup | None = None
        self._outage = outage or StoreOutage(self.events, self.worker_id)
        self._heartbeat = Heartbeat(
            self._run,
            worker_id=self.worker_id,
            settings=settings,
            slots=self._slots,
            deadline=self._deadline,
            outage=self._outage,
            events=self.events,
        )
        self._acks = AckBatcher(
            self._send_reports,
            give_up_after=2 * settings.lease_seconds,
            on_outage=self._outage.failed,
            still_running=self._slots.may_report,
            # Claiming ahead, a batch is worth sending once the jobs held will
            # last no longer than its round trip: the claim riding with it refills them.
            slack=self._held_jobs_slack,
        )

    # -- the store, with the same plans as every other caller

    async def _run(self, op: Op[Any]) -> Any:
        return await plan.run_async(self.store, op)

    # -- life cycle

    async def run(self) -> None:
        """Register, work until drained (see :meth:`drain`), hand back, deregister."""
        registered = False
        try:
            # Pool children start while the worker registers, and before the
            # first claim: a claimed job's lease is running, and an interpreter
            # start is tens of milliseconds (the worker's start-up counts
            # towards its first jobs' wait).
            async with anyio.create_task_group() as starting:
                starting.start_soon(self._sandboxes.warm_up)
                registered = await self._register()
            if not registered:
                return  # drained while the disk was full: nothing was claimed
            self.events.emit(
                "worker_started",
                worker=self.worker_id,
                queues=",".join(self.settings.queues),
                slots=self._slots.count,
                **self._autoscale_range(),
                isolation=self.settings.isolation,
                cpus=format_cpu_list(self.settings.cpus) if self.settings.cpus else "any",
                containment=cgroups.describe(self._cgroups),
            )
            async with anyio.create_task_group() as loops:
                self._loops = loops
                loops.start_soon(self._heartbeat.run, self.stopped)
                loops.start_soon(self._acks.run, self.stopped)
                loops.start_soon(self._hand_back_overdue, self.stopped)
                if self.settings.maintenance:
                    maintainer = Maintainer(
                        self.store,
                        holder=self.worker_id,
                        # Two heartbeats and a margin: a late one does not lose the lease.
                        lease_seconds=max(10.0, 3 * self.settings.heartbeat_seconds),
                        renewed_by_heartbeat=True,
                    )
                    self._heartbeat.maintainer = maintainer
                    loops.start_soon(partial(maintainer.run_forever, stop=self.stopped))
                async with anyio.create_task_group() as slots:
                    self._slot_tasks = slots
                    for sandbox in self._sandboxes.in_use:
                        slots.start_soon(self._slot, sandbox)
                    if self._autoscaler is not None:
                        loops.start_soon(
                            partial(
                                self._autoscaler.run,
                                self.draining,
                                backlog=self._backlog,
                                add_slots=self._add_slots,
                                on_outage=self._outage.failed,
                            )
                        )
                    await self._claim_loop()
                    await self._wait_for_jobs(self.settings.grace_seconds)
                    slots.cancel_scope.cancel()
                self.stopped.set()
        finally:
            self.stopped.set()
            with anyio.CancelScope(shield=True):
                await self._close(deregister=registered)

    def drain(self) -> None:
        """Stop claiming; running jobs get the grace period, then are handed back."""
        if not self.draining.is_set():
            self.events.emit(
                "worker_draining", worker=self.worker_id, running=len(self._slots.held)
            )
            self.draining.set()
            self._slots.wake()
            # Jobs waiting in a pool child behind another go back, as those claimed ahead do.
            for running in list(self._slots.held.values()):
                if running.queued:
                    running.stop(StopReason.DRAIN)

    def stop_now(self) -> None:
        """Stop every running job at once and hand it back (a second signal)."""
        self.drain()
        for running in list(self._slots.held.values()):
            running.stop(StopReason.DRAIN)

    def _autoscale_range(self) -> dict[str, str]:
        """For the start line: the range of an autoscaling worker's slots, and what sets its top."""
        if self._autoscaler is None:
            return {}
        ceiling, reason = self.settings.slot_ceiling
        return {"autoscale": f"{self._autoscaler.least}-{ceiling}", "max_set_by": reason}

    # -- autoscaling (see taskq.worker.autoscale)

    async def _backlog(self, limit: int) -> int:
        count: int = await self._run(
            job_backlog(self.settings.queues, self.settings.labels, limit=limit)
        )
        return count

    async def _add_slots(self, count: int) -> bool:
        """Start ``count`` slots, their pool children first; False if a child could not start."""
        try:
            sandboxes = await self._sandboxes.made_ready(count)
        except Exception as exc:
            # A child that cannot start (out of memory, say): the worker goes on as it is.
            self.events.emit("slots_not_added", worker=self.worker_id, error=repr(exc)[:200])
            return False
        if self.draining.is_set() or self._slot_tasks is None:
            await self._sandboxes.close_unused(sandboxes)
            return False
        self._sandboxes.in_use.extend(sandboxes)
        self._slots.add(count)
        for sandbox in sandboxes:
            self._slot_tasks.start_soon(self._slot, sandbox)
        return True

    async def _register(self) -> bool:
        """Register this worker; False if it was drained first.

        A full disk is waited out, told once as any outage is, since freeing
        space is all it takes; a failure that cannot pass stops the worker.
        """
        request = worker_register(
            self.worker_id,
            name=self.settings.name,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.settings.queues,
            labels=self.settings.labels,
            slots=self._slots.count,
            max_slots=None if self._autoscaler is None else self._autoscaler.most,
            wake_address=hint_address(self.store),
        )
        while not self.draining.is_set():
            try:
                await self._run(request)
            except errors.StoreFull as exc:
                self._outage.failed(exc)
                with anyio.move_on_after(self.settings.idle_poll_seconds):
                    await self.draining.wait()
            else:
                self._outage.written()
                return True
        return False

    async def _close(self, *, deregister: bool) -> None:
        await self._sandboxes.aclose()
        cgroups.remove(self._cgroups)
        self._deadline.close()
        if not deregister:
            return  # never registered: nothing to say, and nothing started
        try:
            await self._run(worker_set_state(self.worker_id, "stopped"))
        except errors.StoreError as exc:
            log.warning("could not deregister: %s", exc)
        self.events.emit("worker_stopped", worker=self.worker_id)

    async def _wait_for_jobs(self, grace: float) -> None:
        """Give running jobs ``grace`` seconds, then stop the rest; return once all are reported."""
        with anyio.move_on_after(grace):
            await self._until_no_jobs()
        for running in list(self._slots.held.values()):
            running.stop(StopReason.DRAIN)
        await self._until_no_jobs()

    async def _until_no_jobs(self) -> None:
        while self._slots.held:
            await self._slots.next_change().wait()

    # -- claiming

    def _claim_request(self, limit: int) -> ClaimRequest:
        return ClaimRequest(
            worker_id=self.worker_id,
            queues=self.settings.queues,
            limit=limit,
            lease_seconds=self.settings.lease_seconds,
            labels=self.settings.labels,
        )

    async def _report_and_claim(
        self, reports: list[Report], free: int, sent_at: float
    ) -> tuple[list[Fenced], int]:
        """Send ``reports`` and claim up to ``free`` jobs in one request; hold those claimed.

        ``sent_at`` is when the request was sent, or earlier: a claimed
        lease runs from no sooner. Returns the reports' verdicts and how
        many jobs came.
        """
        verdicts, claimed = await self._run(
            job_report_and_claim(reports, self._claim_request(free))
        )
        for job in claimed:
            running = RunningJob(job, renewed_at=sent_at)
            self._slots.hold(running)
            if self._deadline.expired():
                # Back from a freeze or an outage: the jobs held from before are
                # past saving; the deadline must follow the leases just claimed.
                self._heartbeat.check_leases()
            else:
                self._deadline.claimed(sent_at)
            self._last_claimed = running.started
        return verdicts, len(claimed)

    async def _claim_loop(self) -> None:
        """Claim for free slots; while busy, most claims ride along with acknowledgements."""
        idle = min(0.05, self.settings.idle_poll_seconds)
        while not self.draining.is_set():
            free = self._slots.to_claim()
            # Reports waiting to go, or jobs held that outlast a round trip (their
            # reports will go before the slots run dry): that batch claims for
            # these slots, and its answer wakes this loop. A claim of its own
            # would be a write for the few jobs a busy worker's slots free
            # between two batches.
            if free <= 0 or self._acks.has_waiting() or self._held_jobs_outlast_a_round():
                await self._slots.next_change().wait()
                continue
            looked_at = time.monotonic()
            try:
                claimed = 0
                with self._slots.promised(free):
                    if await self._run(job_claimable(self.settings.queues)):
                        # A claim alone: a report and claim with nothing to report.
                        _, claimed = await self._report_and_claim([], free, looked_at)
            except errors.StoreError as exc:
                self._outage.failed(exc)
                await self._pause(idle)
                idle = min(idle * 2, self.settings.idle_poll_seconds)
                continue
            if claimed == free:
                idle = min(0.05, self.settings.idle_poll_seconds)
                continue  # a full batch: there may be more waiting
            if claimed:
                idle = min(0.05, self.settings.idle_poll_seconds)
            if time.monotonic() - self._last_claimed < _BUSY_POLL_WINDOW_SECONDS:
                interval = min(idle, _BUSY_POLL_SECONDS)
            else:
                interval = idle
            # Looks start an interval apart, not an interval after the last claim
            # ended: a claim's write (a Raft round on rqlite) would add to the wait.
            since = time.monotonic() - looked_at
            if since < interval:
                await self._pause(interval - since)
            idle = min(idle * 2, self.settings.idle_poll_seconds)

    def _held_jobs_slack(self) -> float | None:
        """How long the jobs held keep the slots busy past a round trip (``Prefetch.slack``)."""
        return self._slots.prefetch.slack(self._slots.may_report())

    def _held_jobs_outlast_a_round(self) -> bool:
        slack = self._held_jobs_slack()
        return slack is not None and slack > 0

    async def _pause(self, seconds: float) -> None:
        """Wait up to ``seconds``; wake early when the store changes, a slot frees or we drain."""
        changed = self._slots.next_change()
        async with anyio.create_task_group() as waits:

            async def store_changed() -> None:
                await self.store.wait_for_change(seconds)
                waits.cancel_scope.cancel()

            async def slot_freed() -> None:
                await changed.wait()
                waits.cancel_scope.cancel()

            waits.start_soon(store_changed)
            waits.start_soon(slot_freed)

    async def _hand_back_overdue(self, stopped: anyio.Event) -> None:
        """Hand back the jobs claimed ahead that waited past ``HAND_BACK_SECONDS``: for
        a slot, or in a slot's pool child behind a job that runs long.

        Looked at twice a bound, so none waits more than one and a half. A
        drain hands back every job claimed ahead by itself.
        """
        while not stopped.is_set():
            with anyio.move_on_after(HAND_BACK_SECONDS / 2):
                await stopped.wait()
            if self.draining.is_set():
                continue
            for running in self._slots.take_overdue():
                running.stop(StopReason.HAND_BACK)
                self._report(running, stopped_before_start())
            since = time.monotonic() - HAND_BACK_SECONDS
            for taken, sandbox in list(self._taken_by_slots):
                # The first is running; the rest wait in its child behind it.
                for entry in list(taken)[1:]:
                    if entry[0].claimed < since:
                        await self._hand_back_queued(entry, taken, sandbox)

    # -- running jobs

    async def _slot(self, sandbox: Sandbox) -> None:
        """Run claimed jobs one after another in ``sandbox``, until cancelled.

        While jobs are short and more wait than the idle slots will take, the
        slot hands its pool child a few at once (see ``_may_queue``): the
        child then goes from one to the next without a round trip to this
        loop in between. A finished job's report is handed to the batcher and
        the slot moves on: the job stays held (``Slots.held``) until the store
        has answered.
        """
        taken: _Taken = collections.deque()
        self._taken_by_slots.append((taken, sandbox))
        try:
            while True:
                if not taken:
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
                refill = len(taken) <= self.settings.child_queue // 2
                while refill and self._may_queue(sandbox, len(taken)):
                    running = self._slots.take_waiting()
                    running.queued = True
                    taken.append((running, await self._start_job(running, sandbox)))
                running, started = taken[0]
                outcome = await self._finish_job(running, sandbox, started)
                taken.popleft()
                if taken:
                    taken[0][0].queued = False
                    taken[0][0].started = time.monotonic()
                self._report(running, outcome)
        except BaseException:
            for running, _ in taken:
                self._slots.release(running)
            raise
        finally:
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
        self._report(running, await self._finish_job(running, sandbox, started))

    def _may_queue(self, sandbox: Sandbox, taken: int) -> bool:
        """Whether the slot should take another job now, behind the ``taken`` ones it has.

        Only while jobs are short (they are claimed ahead then), only as many
        as ``child_queue`` allows, and only jobs no idle slot is about to take:
        a job queued behind a long one would wait for it.
        """
        return (
            taken < self.settings.child_queue
            and self._slots.more_than_idle_slots_take()
            and not self.draining.is_set()
            and sandbox.can_queue()
        )

    async def _start_job(self, running: RunningJob, sandbox: Sandbox) -> StartedJob | Outcome:
        """Hand the job to ``sandbox``; or its outcome, when it is not to run."""
        job = running.job
        if self.draining.is_set() and not running.cancel.is_set():
            # Claimed ahead, not started: another worker may run it now.
            running.stop(StopReason.DRAIN)
        running.started = time.monotonic()
        running.in_slot = True
        self.events.emit(
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
            return request

        def on_progress(update: JobUpdate) -> None:
            running.progress = update
            if update.checkpoint_json is not None:
                running.checkpoint_json = update.checkpoint_json
            if running.progress_changed is None:
                # The first report: only now does this job need a task to forward them.
                running.progress_changed = anyio.Event()
                assert self._loops is not None, "jobs run only while the worker runs"
                self._loops.start_soon(forward_progress, running, self._run)
            running.progress_changed.set()

        try:
            return await sandbox.start(request, cancel=running.cancel, on_progress=on_progress)
        except BaseException:
            self._slots.left_slot()
            raise

    async def _finish_job(
        self, running: RunningJob, sandbox: Sandbox, started: StartedJob | Outcome
    ) -> Outcome:
        try:
            if isinstance(started, Outcome):
                outcome = started
            else:
                outcome = await sandbox.finish(started)
        finally:
            self._slots.left_slot()
            running.in_slot = False
            running.ended = True
            if running.progress_changed is not None:
                running.progress_changed.set()  # lets the forwarder see the job is over
        # A stopped job's time says nothing of the others.
        if running.stopped_because is None and outcome.wall_seconds > 0:
            self._slots.prefetch.job_ran(outcome.wall_seconds)
        return outcome

    # -- reporting

    def _report(self, running: RunningJob, outcome: Outcome) -> None:
        """Queue the job's report; once the store has answered, log it and free its place."""
        job = running.job
        running.reporting = True
        # Only a job we killed is handed back: one that finished as it was being
        # stopped has a real outcome. Read once: a heartbeat racing this report
        # may mark the job lost afterwards.
        stopped = running.stopped_because if outcome.status is Status.CANCELLED else None
        if outcome.status is Status.LEASE_EXPIRED:
            stopped = StopReason.LEASE_GONE  # handed back: no fault of the job's
        # The job's code started its wall time before now, which is its end
        # (or as near as the slot can tell); before that it waited from its claim.
        waited = max(time.monotonic() - outcome.wall_seconds - running.claimed, 0.0)
        report = report_of(job, stopped, outcome, running.checkpoint_json, running.progress, waited)
        verdict = self._acks.submit(report)

        def answered(verdict: asyncio.Future[Fenced]) -> None:
            self._slots.release(running)
            if verdict.cancelled():
                return
            self.events.emit(
                "job_finished" if verdict.result() is Fenced.ACCEPTED else "job_dropped",
                job=job.lease.job_id,
                status=report.attempt.outcome,
                stopped=stopped or "",
                seconds=round(time.monotonic() - running.started, 3),
                peak_rss_mib=round((outcome.peak_rss_bytes or 0) / 2**20, 1),
                error=(outcome.error or {}).get("message", "")[:200] if outcome.error else "",
            )

        verdict.add_done_callback(answered)

    async def _send_reports(self, reports: list[Report]) -> list[Fenced]:
        """Acknowledge, and claim in the same request for the slots these reports free."""
        leaving = sum(1 for report in reports if report.lease.job_id in self._slots.held)
        free = self._slots.to_claim() + leaving
        if self.draining.is_set() or free <= 0:
            verdicts: list[Fenced] = await self._run(job_report(reports))
            return verdicts
        sent_at = time.monotonic()
        with self._slots.promised(free):
            verdicts, _ = await self._report_and_claim(reports, free, sent_at)
        self._slots.prefetch.round_took(time.monotonic() - sent_at)
        return verdicts
