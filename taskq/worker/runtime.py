"""The worker's life cycle over its roles: start, work, drain, stop.

The roles are built by ``taskq.worker.factory`` and each lives in its own
module: ``claimer`` (the claim loop) with ``claim_requests`` (claims, alone
or riding with reports), ``executor`` (the slots that run jobs in sandboxes,
and the hand-back of jobs claimed ahead that no slot started in time),
``completer`` (reports and their verdicts) over ``acks`` (the batches),
``heartbeat`` (leases), ``output_flusher`` (the jobs' output, as it comes),
``autoscale`` (slots that follow the backlog) and ``store_outage``. One
anyio task group holds their loops. Draining stops claims, records the
worker as draining in the store (``draining_state``), hands back jobs
claimed ahead, gives running jobs a grace period, then stops them and
hands them back without using up an attempt.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from functools import partial

import anyio
import anyio.to_thread
import msgspec

from taskq import errors
from taskq.broker.ops.maintenance import Maintainer
from taskq.broker.ops.workers import worker_register, worker_set_state
from taskq.broker.stores.store import Store
from taskq.broker.stores.wake_hints import hint_address
from taskq.worker.acks import AckBatcher
from taskq.worker.autoscale import Autoscaler
from taskq.worker.claim_requests import ClaimRequests
from taskq.worker.claimer import Claimer
from taskq.worker.cpus import format_cpu_list
from taskq.worker.draining_state import write_draining
from taskq.worker.events import EventLog
from taskq.worker.executor import Executor
from taskq.worker.heartbeat import Heartbeat
from taskq.worker.output_flusher import OutputFlusher
from taskq.worker.publishing import Publisher
from taskq.worker.running import StopReason
from taskq.worker.sandbox import cgroups
from taskq.worker.sandbox.cgroups import CgroupPlan
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.slot_sandboxes import REST_OF_POOL_AFTER_SECONDS, SlotSandboxes
from taskq.worker.slots import Slots
from taskq.worker.start_turns import StartTurn
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import Run

log = logging.getLogger("taskq.worker")


def new_worker_id(settings: WorkerSettings) -> str:
    """A worker's id: its name, made unique."""
    return f"{settings.name}-{uuid.uuid4().hex[:8]}"


class Worker(msgspec.Struct, eq=False, kw_only=True):
    """One worker process's jobs and loops, against one store; ``factory.build_worker`` makes it."""

    store: Store
    run_op: Run
    settings: WorkerSettings
    worker_id: str
    events: EventLog
    outage: StoreOutage
    draining: anyio.Event
    """Set by :meth:`drain`: the roles stop taking work."""
    stopped: anyio.Event
    """Set once every job is reported: the loops end."""
    slots: Slots
    sandboxes: SlotSandboxes
    cgroup_plan: CgroupPlan
    deadline: LeaseDeadline
    start_turn: StartTurn
    """Held while the worker starts, so that workers launched beside it start after it."""
    heartbeat: Heartbeat
    maintainer: Maintainer | None
    autoscaler: Autoscaler | None
    acks: AckBatcher
    claims: ClaimRequests
    executor: Executor
    claimer: Claimer
    output: OutputFlusher
    publisher: Publisher | None = None
    """The declared jobs it serves; written again later when the write at start failed."""

    async def run(self) -> None:
        """Register, work until drained (see :meth:`drain`), hand back, deregister."""
        registered = False
        try:
            registered = await self._register()
            if not registered:
                return  # drained while the disk was full: nothing was claimed
            self.events.emit(
                "worker_started",
                worker=self.worker_id,
                # Which store, its password masked: a worker on another store than its
                # submitters' never sees their jobs.
                store=self.store.url,
                queues=",".join(self.settings.queues),
                slots=self.slots.count,
                **self._autoscale_range(),
                isolation=self.settings.isolation,
                cpus=format_cpu_list(self.settings.cpus) if self.settings.cpus else "any",
                containment=cgroups.describe(self.cgroup_plan),
            )
            if self.publisher is not None:
                self.publisher.tell_if_none(self.settings.modules)
            async with anyio.create_task_group() as loops:
                loops.start_soon(self.heartbeat.run, self.stopped)
                loops.start_soon(self.acks.run, self.stopped)
                loops.start_soon(self.executor.hand_back_overdue, self.stopped)
                loops.start_soon(self.output.run, self.stopped)
                loops.start_soon(self._end_start)
                loops.start_soon(
                    partial(
                        write_draining,
                        self.run_op,
                        self.worker_id,
                        draining=self.draining,
                        stopped=self.stopped,
                        outage=self.outage,
                        retry_seconds=self.settings.heartbeat_seconds,
                    )
                )
                if self.maintainer is not None:
                    loops.start_soon(partial(self.maintainer.run_forever, stop=self.stopped))
                if self.publisher is not None and self.publisher.pending:
                    every = self.settings.heartbeat_seconds
                    loops.start_soon(self.publisher.retry, self.run_op, self.stopped, every)
                async with self.executor.slots_running(loops):
                    if self.autoscaler is not None:
                        loops.start_soon(
                            partial(
                                self.autoscaler.run,
                                self.draining,
                                backlog=self.claims.backlog,
                                add_slots=self.executor.add_slots,
                                on_outage=self.outage.failed,
                            )
                        )
                    await self.claimer.run()
                    await self._wait_for_jobs(self.settings.grace_seconds)
                self.stopped.set()
        finally:
            self.stopped.set()
            with anyio.CancelScope(shield=True):
                await self._close(deregister=registered)

    async def _end_start(self) -> None:
        """Give back the start turn, and start the pool children that did not start
        with the worker (see ``slot_sandboxes``).

        Once the worker's first report is written, or ``REST_OF_POOL_AFTER_SECONDS``
        after it registered if none is by then (no job came, or a long one).
        """
        with anyio.move_on_after(REST_OF_POOL_AFTER_SECONDS):
            await self.acks.first_answered.wait()
        self.start_turn.give_back()
        self.sandboxes.start_the_rest()
        # Off the first jobs' path: the first sweep after a year may remove thousands.
        swept = await anyio.to_thread.run_sync(cgroups.sweep_left_behind, self.cgroup_plan)
        if swept:
            self.events.emit("cgroups_swept", count=len(swept), first=swept[0])

    def drain(self) -> None:
        """Stop claiming; running jobs get the grace period, then are handed back.

        The store hears of it from a loop of :meth:`run` (``draining_state``): a
        signal handler cannot wait for a write.
        """
        if not self.draining.is_set():
            held = len(self.slots.held)
            # What a Ctrl-C at a terminal leads to, said where its user looks.
            self.events.emit(
                "worker_draining",
                worker=self.worker_id,
                running=held,
                grace_seconds=self.settings.grace_seconds,
                hint="running jobs finish within the grace, else go back to the queue; "
                "a second Ctrl-C or SIGTERM hands them back now"
                if held
                else "",
            )
            self.draining.set()
            self.slots.wake()
            # Jobs waiting in a pool child behind another go back, as those claimed ahead do.
            for running in list(self.slots.held.values()):
                if running.queued:
                    running.stop(StopReason.DRAIN)

    def stop_now(self) -> None:
        """Stop every running job at once and hand it back (a second signal)."""
        self.drain()
        for running in list(self.slots.held.values()):
            running.stop(StopReason.DRAIN)

    def _autoscale_range(self) -> dict[str, str]:
        """For the start line: the range of an autoscaling worker's slots, and what sets its top."""
        if self.autoscaler is None:
            return {}
        ceiling, reason = self.settings.slot_ceiling
        return {"autoscale": f"{self.autoscaler.least}-{ceiling}", "max_set_by": reason}

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
            slots=self.slots.count,
            max_slots=None if self.autoscaler is None else self.autoscaler.most,
            wake_address=hint_address(self.store),
            policy=self.settings.policy,
        )
        while not self.draining.is_set():
            try:
                await self.run_op(request)
            except errors.StoreFull as exc:
                self.outage.failed(exc)
                with anyio.move_on_after(self.settings.idle_poll_seconds):
                    await self.draining.wait()
            else:
                self.outage.written()
                return True
        return False

    async def _close(self, *, deregister: bool) -> None:
        self.start_turn.give_back()  # drained before it had started
        await self.sandboxes.aclose()
        cgroups.remove(self.cgroup_plan)
        self.deadline.close()
        if not deregister:
            return  # never registered: nothing to say, and nothing started
        try:
            await self.run_op(worker_set_state(self.worker_id, "stopped"))
        except errors.StoreError as exc:
            log.warning("could not deregister: %s", exc)
        self.events.emit("worker_stopped", worker=self.worker_id)

    async def _wait_for_jobs(self, grace: float) -> None:
        """Give running jobs ``grace`` seconds, then stop the rest; return once all are reported."""
        with anyio.move_on_after(grace):
            await self._until_no_jobs()
        for running in list(self.slots.held.values()):
            running.stop(StopReason.DRAIN)
        await self._until_no_jobs()

    async def _until_no_jobs(self) -> None:
        while self.slots.held:
            await self.slots.next_change().wait()
