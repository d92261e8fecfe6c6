"""Running one job in a resource-limited child process, from async (anyio) code.

Two isolation modes share one interface:

- ``Sandbox`` starts a fresh Python child for every job, with limits
  the job cannot raise, and kills the job's whole process group when it
  ends. The mode for untrusted code; costs an interpreter start per job.
- ``PoolSandbox`` keeps one limited child and sends it job after job, so a
  job costs a message round trip. Jobs share the process: one may leave
  state behind (modules, threads, the working directory, processes it
  started, which live until the child is replaced). Its limits hold as in
  a fresh child: hard limits are lowered to each job's own, and its CPU is
  counted by the keeper, outside it (see ``rlimits`` and ``keeper``). The
  mode is for trusted code. The child is replaced after ``max_jobs_per_child`` jobs,
  and after any job that killed it or may have left it unhealthy (anything
  but success, an exception or an invalid result). One ``PoolSandbox`` runs
  one job at a time: a worker keeps one per execution slot.

``shell`` payloads always run as a process of their own: a fresh child that
applies the limits and then execs the command in its own process group.

Every child is held by a keeper (see ``keeper``): a job dies with its
worker, when its lease can no longer be renewed (``LeaseDeadline``), and at
its wall clock even when the worker cannot act; the keeper kills every
process below it, including those that called ``setsid``. A job's
environment is the worker's less anything not on the allowlist (see
``job_environment``): no store URL, no credentials.

A job comes as a ``JobRequest`` that ``JobPreparer`` made: its payload
parsed, the worker's policy applied, its limits lowered to the worker's
maximums. ``run`` prepares a payload itself, for callers without a claimed job.

What the sandbox does not do: it bounds resources, not access. A job runs
as the worker's user with its files and network. Linux only: it relies on
pidfds (kernel 5.3 or later), ``prctl`` and /proc.

Every child is watched from the event loop (``pool_child``): a job costs a
message each way and no thread, and a fresh child is watched as a pool
child that takes one job. While jobs are short, a slot may queue more than
one in its pool child (``start`` them, then ``finish`` each in turn), so the
child goes from one to the next without waiting for the worker.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from types import TracebackType
from typing import Self

import anyio
import msgspec

from taskq.broker.limits import Limits
from taskq.job_context import JobUpdate
from taskq.worker.sandbox import judging, protocol
from taskq.worker.sandbox.child_process import ChildProcess, ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.outcome import (
    Outcome,
    Status,
    lease_expired_before_start,
    stopped_before_start,
)
from taskq.worker.sandbox.payloads import Payload, ShellPayload
from taskq.worker.sandbox.pool_child import PoolChild
from taskq.worker.sandbox.pool_job import PoolJob
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.stopping import StopRequest
from taskq.worker.sandbox.supervision import EndReason

ProgressCallback = Callable[[JobUpdate], None]
OutputCallback = Callable[[bytes], None]

# Outcomes after which a pool child is known to be alive and sound.
_POOL_CHILD_SURVIVES = {Status.SUCCEEDED, Status.ERROR, Status.RESULT_INVALID}


class StartedJob(msgspec.Struct, eq=False):
    """A job handed to a sandbox: its request, and where it is (if anywhere yet)."""

    request: protocol.JobRequest
    cancel: StopRequest | None
    on_progress: ProgressCallback | None
    ended: Outcome | None = None
    """Its outcome already: its lease ran out before it could start."""
    in_child: tuple[PoolChild, PoolJob] | None = None
    handed_back: int = 0
    """How many pool children handed it back unstarted."""
    on_output: OutputCallback | None = None


class Sandbox:
    """Runs every job in a fresh limited child process: the isolation for untrusted code.

    What ``PoolSandbox`` shares: the worker's ``JobPreparer`` (``run``
    prepares payloads with it; its maximums are a pool child's hard limits),
    and what every child starts with (the jobs' environment, the lease deadline).
    """

    def __init__(
        self, *, preparer: JobPreparer | None = None, setup: ChildSetup | None = None
    ) -> None:
        """Run jobs as ``preparer`` allows, in children that start with ``setup``.

        By default: ``JobPreparer``'s defaults, and this process's environment
        through ``job_environment`` with no lease deadline and no cgroups.
        """
        self._preparer = preparer or JobPreparer()
        self._setup = setup or ChildSetup(env=job_environment(os.environ))
        self._deadline = self._setup.deadline

    async def run(
        self,
        payload: Payload,
        limits: Limits,
        *,
        cancel: StopRequest | None = None,
        on_progress: ProgressCallback | None = None,
        on_output: OutputCallback | None = None,
    ) -> Outcome:
        """Run ``payload`` within ``limits`` (lowered to the worker's maximums).

        Setting ``cancel`` kills the job (outcome ``cancelled``); so does
        cancelling the calling task, which then sees its cancellation once
        the job's processes are dead. ``on_progress`` is called in the event
        loop's thread with the job's ``progress.report`` calls; if it
        raises, the job is killed and the exception propagates.
        ``on_output``, in the same thread, with each piece of the job's
        output (stdout and stderr) as it is read.
        """
        request = self._preparer.request(payload, limits)
        if isinstance(request, Outcome):
            return request
        started = await self.start(
            request, cancel=cancel, on_progress=on_progress, on_output=on_output
        )
        return await self.finish(started)

    async def start(
        self,
        request: protocol.JobRequest,
        *,
        cancel: StopRequest | None = None,
        on_progress: ProgressCallback | None = None,
        on_output: OutputCallback | None = None,
    ) -> StartedJob:
        """Hand the job over, behind those started before; ``finish`` waits for it.

        ``run`` is ``start`` then ``finish`` (see there); jobs are finished in
        the order they were started.
        """
        started = StartedJob(request, cancel, on_progress, on_output=on_output)
        if self._deadline is not None and self._deadline.expired():
            started.ended = lease_expired_before_start()
        else:
            await self._hand_over(started)
        return started

    async def _hand_over(self, started: StartedJob) -> None:
        """Send the job on its way now, if this sandbox runs jobs before ``finish`` (no)."""

    async def finish(self, started: StartedJob) -> Outcome:
        """Wait for a started job to end; its outcome (see ``run``)."""
        if started.ended is not None:
            return started.ended
        request = started.request
        # Shielded: a caller cancelled while the process starts must not leave it running.
        with anyio.CancelScope(shield=True):
            child = await PoolChild.spawn_for_one(request, self._setup)
        try:
            supervised = await child.run(
                request,
                stop=started.cancel,
                on_progress=started.on_progress,
                on_output=started.on_output,
            )
        finally:
            await child.aclose()
        return judging.decide_outcome(supervised, kind=request.payload.kind, limits=request.limits)

    def can_queue(self) -> bool:
        """Whether a job started now would wait in a child already running one."""
        return False

    def withdraw(self, started: StartedJob) -> bool:
        """Take back a job queued behind another, if it is certain never to start.

        True: ``finish`` now returns at once, and the job never ran. False:
        it may be starting (or is not queued); stop it as any running job.
        """
        return False

    async def warm_up(self) -> None:
        """Start any child process kept between jobs now, so the first job does not wait."""

    async def aclose(self) -> None:
        """Stop any child process kept between jobs."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class PoolSandbox(Sandbox):
    """Runs jobs one after another in a reused child process: for trusted code."""

    def __init__(
        self,
        *,
        preparer: JobPreparer | None = None,
        setup: ChildSetup | None = None,
        max_jobs_per_child: int = 100,
        started: ChildProcess | None = None,
    ) -> None:
        """The child's hard limits are the worker's maximums; each job sets its soft limits.

        ``started``: its first child, started already (``ChildProcess.start("pool",
        setup, ceiling=...)``, with the worker, before its event loop: see
        ``taskq.worker.first_children``).
        """
        if max_jobs_per_child < 1:
            raise ValueError("max_jobs_per_child must be at least 1")
        super().__init__(preparer=preparer, setup=setup)
        self._max_jobs_per_child = max_jobs_per_child
        self._started = started
        self._child: PoolChild | None = None
        self._jobs_in_child = 0
        # asyncio's lock: taken uncontended once a job, it costs no trip round the event loop.
        self._lock = asyncio.Lock()

    async def _hand_over(self, started: StartedJob) -> None:
        """Send the job to the pool child, behind any it has (``shell``: run in ``finish``)."""
        request = started.request
        if not isinstance(request.payload, ShellPayload):
            child = await self._ready_child()
            self._jobs_in_child += 1
            job = child.submit(
                request,
                stop=started.cancel,
                on_progress=started.on_progress,
                on_output=started.on_output,
            )
            started.in_child = (child, job)

    async def finish(self, started: StartedJob) -> Outcome:
        """Wait for a started job; see ``Sandbox.run``.

        A job its child never started (the child died, was retired first, or
        could not take its limits) runs now in a fresh child, unless it was
        stopped meanwhile.
        """
        if started.in_child is None:
            return await super().finish(started)
        child, job = started.in_child
        try:
            supervised = await child.finish(job)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._retire(child)
            raise
        if supervised.reason is EndReason.NOT_STARTED:
            if started.cancel is not None and started.cancel.is_set():
                return stopped_before_start()
            if started.handed_back:
                # A fresh pool child takes any job a worker may run: a second hand-back
                # is the job itself writing ``withdrawn`` on the channel, to be run
                # again and again. A child of its own refuses that message.
                return await super().finish(
                    StartedJob(
                        started.request,
                        started.cancel,
                        started.on_progress,
                        on_output=started.on_output,
                    )
                )
            again = await self.start(
                started.request,
                cancel=started.cancel,
                on_progress=started.on_progress,
                on_output=started.on_output,
            )
            again.handed_back = started.handed_back + 1
            return await self.finish(again)
        request = started.request
        outcome = judging.decide_outcome(
            supervised, kind=request.payload.kind, limits=request.limits
        )
        if (
            supervised.ended is not None
            or outcome.status not in _POOL_CHILD_SURVIVES
            or (supervised.report is not None and supervised.report.children_left)
            or (self._jobs_in_child >= self._max_jobs_per_child and child.in_flight == 0)
        ):
            await self._retire(child)
        return outcome

    def withdraw(self, started: StartedJob) -> bool:
        if started.in_child is None:
            return False
        child, job = started.in_child
        return child.withdraw_now(job)

    def can_queue(self) -> bool:
        child = self._child
        return (
            child is not None
            and child.in_flight > 0
            and child.accepting()
            and self._jobs_in_child < self._max_jobs_per_child
        )

    async def warm_up(self) -> None:
        """Start the pool child now rather than at the first job."""
        await self._ready_child()

    async def aclose(self) -> None:
        """Stop the pool child, after the running job if there is one."""
        async with self._lock:
            if self._started is not None:
                await self._watch_started()
            await self._retire_child()

    async def _ready_child(self) -> PoolChild:
        async with self._lock:
            # A child that died between jobs (a job's leftover thread, the OOM
            # killer) must not be blamed on the next job; one that has run its
            # share of jobs makes way once those are over. A job queued behind
            # others needs no system call to ask: were the child dead, the job
            # would end NOT_STARTED and run in a fresh one.
            child = self._child
            if child is not None and (
                not (child.accepting() if child.in_flight else child.usable())
                or self._jobs_in_child >= self._max_jobs_per_child
            ):
                await self._retire_child()
            if self._child is None and self._started is not None:
                await self._watch_started()
            if self._child is None:
                self._child = await PoolChild.spawn(self._preparer.worker_max, self._setup)
                self._jobs_in_child = 0
            return self._child

    async def _watch_started(self) -> None:
        """Take on the child started before the loop ran, as any child this sandbox starts."""
        started, self._started = self._started, None
        if started is not None:
            self._child = PoolChild(started, self._preparer.worker_max)
            self._jobs_in_child = 0

    async def _retire(self, child: PoolChild) -> None:
        """Retire ``child`` if it is still the current one (a job may have retired it already)."""
        async with self._lock:
            if self._child is child:
                await self._retire_child()

    async def _retire_child(self) -> None:
        if self._child is not None:
            child, self._child = self._child, None
            await child.aclose()
