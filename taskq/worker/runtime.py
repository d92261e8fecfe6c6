"""The worker: claims jobs for its free slots, runs them in sandboxes, reports, heartbeats.

One anyio task group holds the loops. The claimer asks for as many jobs as
there are free slots in one request, and when idle lets a cheap read decide
whether a claim is worth a write. The heartbeat extends every lease in one
statement and stops any job whose lease is gone. Reports are fenced by the
lease: a result the store refuses is dropped, never forced in. Draining stops
claims, gives running jobs a grace period, then stops them and hands them back
without using up an attempt.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from taskq import errors
from taskq.broker import operations as ops
from taskq.broker import plan
from taskq.broker.limits import Limits, LimitsInvalid, parse_limits
from taskq.broker.maintenance import Maintainer
from taskq.broker.plan import Op
from taskq.broker.records import AttemptReport, ClaimedJob, Fenced
from taskq.broker.store import Store
from taskq.worker.events import EventLog
from taskq.worker.outcome import Outcome, Status, error_info
from taskq.worker.payloads import PayloadInvalid, Policy, parse_payload
from taskq.worker.progress import Progress
from taskq.worker.sandbox import PoolSandbox, ProcessSandbox, Sandbox
from taskq.worker.settings import WorkerSettings

log = logging.getLogger("taskq.worker")

# Statuses that will come out the same on another try: fail without retrying.
_NOT_RETRYABLE = {Status.RESULT_INVALID, Status.DISABLED_KIND}
_REPORT_BACKOFF_CAP = 2.0
_PROGRESS_INTERVAL = 0.25


class StopReason:
    """Why a running job was stopped by the worker rather than finishing."""

    LEASE_GONE = "lease_gone"  # cancelled by a user, or the lease expired
    DRAIN = "drain"  # the grace period of a shutdown ran out


@dataclass
class RunningJob:
    job: ClaimedJob
    cancel: anyio.Event = field(default_factory=anyio.Event)
    stopped_because: str | None = None
    started: float = field(default_factory=time.monotonic)
    progress: Progress | None = None
    progress_changed: anyio.Event = field(default_factory=anyio.Event)

    def stop(self, reason: str) -> None:
        if self.stopped_because is None:
            self.stopped_because = reason
        self.cancel.set()


class Worker:
    """One worker process's jobs and loops, against one store."""

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        *,
        events: EventLog | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.events = events or EventLog()
        self.worker_id = worker_id or f"{settings.name}-{uuid.uuid4().hex[:8]}"
        self.running: dict[int, RunningJob] = {}
        self.draining = anyio.Event()
        self.stopped = anyio.Event()
        self._slot_freed = anyio.Event()
        policy = Policy(
            allow_python_exec=settings.allow_python_exec, allow_shell=settings.allow_shell
        )
        self._sandboxes: list[Sandbox]
        if settings.isolation == "pool":
            # A pool child runs one job at a time: one per slot.
            self._sandboxes = [
                PoolSandbox(
                    policy=policy,
                    worker_max=settings.max_limits,
                    max_jobs_per_child=settings.pool_recycle_after,
                )
                for _ in range(settings.concurrency)
            ]
        else:
            shared = ProcessSandbox(policy=policy, worker_max=settings.max_limits)
            self._sandboxes = [shared] * settings.concurrency
        self._free_sandboxes = list(self._sandboxes)

    # -- the store, with the same plans as every other caller

    async def _run(self, op: Op[Any]) -> Any:
        return await plan.run_async(self.store, op)

    # -- life cycle

    async def run(self) -> None:
        """Register, work until drained (see :meth:`drain`), hand back, deregister."""
        await self._run(
            ops.worker_register(
                self.worker_id,
                name=self.settings.name,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=self.settings.queues,
                labels=self.settings.labels,
                slots=self.settings.concurrency,
            )
        )
        self.events.emit(
            "worker_started",
            worker=self.worker_id,
            queues=",".join(self.settings.queues),
            slots=self.settings.concurrency,
            isolation=self.settings.isolation,
        )
        try:
            async with anyio.create_task_group() as loops:
                loops.start_soon(self._heartbeat_loop)
                if self.settings.maintenance:
                    maintainer = Maintainer(self.store, holder=self.worker_id)
                    loops.start_soon(lambda: maintainer.run_forever(stop=self.stopped))
                async with anyio.create_task_group() as jobs:
                    await self._claim_loop(jobs)
                    await self._wait_for_jobs(self.settings.grace_seconds)
                self.stopped.set()
        finally:
            self.stopped.set()
            with anyio.CancelScope(shield=True):
                await self._close()

    def drain(self) -> None:
        """Stop claiming; running jobs get the grace period, then are handed back."""
        if not self.draining.is_set():
            self.events.emit("worker_draining", worker=self.worker_id, running=len(self.running))
            self.draining.set()
            self._slot_freed.set()

    def stop_now(self) -> None:
        """Stop every running job at once and hand it back (a second signal)."""
        self.drain()
        for running in list(self.running.values()):
            running.stop(StopReason.DRAIN)

    async def _close(self) -> None:
        # In process isolation every slot shares one sandbox: close each once.
        for sandbox in {id(sandbox): sandbox for sandbox in self._sandboxes}.values():
            await sandbox.aclose()
        try:
            await self._run(ops.worker_set_state(self.worker_id, "stopped"))
        except errors.StoreError as exc:
            log.warning("could not deregister: %s", exc)
        self.events.emit("worker_stopped", worker=self.worker_id)

    async def _wait_for_jobs(self, grace: float) -> None:
        with anyio.move_on_after(grace):
            while self.running:
                self._slot_freed = anyio.Event()
                await self._slot_freed.wait()
        for running in list(self.running.values()):
            running.stop(StopReason.DRAIN)

    # -- claiming

    async def _claim_loop(self, jobs: anyio.abc.TaskGroup) -> None:
        idle = min(0.05, self.settings.idle_poll_seconds)
        while not self.draining.is_set():
            free = self.settings.concurrency - len(self.running)
            if free <= 0:
                self._slot_freed = anyio.Event()
                await self._slot_freed.wait()
                continue
            try:
                claimed: list[ClaimedJob] = []
                if await self._run(ops.job_claimable(self.settings.queues)):
                    claimed = await self._run(
                        ops.job_claim(
                            self.worker_id,
                            self.settings.queues,
                            limit=free,
                            lease_seconds=self.settings.lease_seconds,
                            labels=self.settings.labels,
                        )
                    )
            except errors.StoreError as exc:
                self.events.emit("store_unavailable", worker=self.worker_id, error=str(exc))
                await self._pause(idle)
                idle = min(idle * 2, self.settings.idle_poll_seconds)
                continue
            for job in claimed:
                self.running[job.lease.job_id] = RunningJob(job)
                jobs.start_soon(self._run_job, self.running[job.lease.job_id])
            if len(claimed) == free:
                idle = min(0.05, self.settings.idle_poll_seconds)
                continue  # a full batch: there may be more waiting
            if claimed:
                idle = min(0.05, self.settings.idle_poll_seconds)
            await self._pause(idle)
            idle = min(idle * 2, self.settings.idle_poll_seconds)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, waking early when a slot frees or draining begins."""
        self._slot_freed = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._slot_freed.wait()

    # -- running one job

    async def _run_job(self, running: RunningJob) -> None:
        job = running.job
        sandbox = self._free_sandboxes.pop()
        self.events.emit(
            "job_started",
            job=job.lease.job_id,
            queue=job.queue,
            attempt=f"{job.attempt}/{job.max_attempts}",
            target=job.payload.get("target") or job.kind.value,
        )
        try:
            outcome = await self._execute(running, sandbox)
            await self._report(running, outcome)
        finally:
            self._free_sandboxes.append(sandbox)
            self.running.pop(job.lease.job_id, None)
            self._slot_freed.set()

    async def _execute(self, running: RunningJob, sandbox: Sandbox) -> Outcome:
        job = running.job
        try:
            payload = parse_payload({"kind": job.kind.value, **job.payload})
            limits = self._limits_of(job)
        except (PayloadInvalid, LimitsInvalid) as exc:
            return Outcome(Status.RESULT_INVALID, error=error_info(type(exc).__name__, str(exc)))

        def progress(update: Progress) -> None:
            running.progress = update
            running.progress_changed.set()

        async with anyio.create_task_group() as helpers:
            helpers.start_soon(self._forward_progress, running)
            outcome = await sandbox.run(
                payload, limits, cancel=running.cancel, on_progress=progress
            )
            helpers.cancel_scope.cancel()
        return outcome

    def _limits_of(self, job: ClaimedJob) -> Limits:
        limits = parse_limits(job.limits, defaults=self.settings.max_limits)
        if job.timeout is not None:
            limits = parse_limits({"wall_seconds": float(job.timeout)}, defaults=limits)
        return limits.bounded_by(self.settings.max_limits)

    async def _forward_progress(self, running: RunningJob) -> None:
        """Send the latest progress, at most a few times a second (a job may report often)."""
        while True:
            await running.progress_changed.wait()
            running.progress_changed = anyio.Event()
            update = running.progress
            if update is None:
                continue
            try:
                verdict = await self._run(
                    ops.job_progress(running.job.lease, update.fraction, update.message)
                )
            except (errors.StoreError, errors.InvalidJob) as exc:
                log.warning("progress of job %s not recorded: %s", running.job.lease.job_id, exc)
            else:
                if verdict is Fenced.LEASE_LOST:
                    running.stop(StopReason.LEASE_GONE)
            await anyio.sleep(_PROGRESS_INTERVAL)

    # -- reporting

    async def _report(self, running: RunningJob, outcome: Outcome) -> None:
        job = running.job
        report = AttemptReport(
            outcome=outcome.status.value,
            exit_code=outcome.exit_code,
            signal=outcome.signal,
            peak_rss_bytes=outcome.peak_rss_bytes or None,
            cpu_seconds=outcome.cpu_seconds,
            log_tail=outcome.log_tail or None,
        )
        op: Callable[[], Op[Fenced]]
        if running.stopped_because is not None:
            # We stopped it: hand it back. A cancel request ends it cancelled;
            # a lease that moved on refuses, and the result is dropped.
            op = lambda: ops.job_release(job.lease, report)  # noqa: E731
        elif outcome.status is Status.SUCCEEDED:
            op = lambda: ops.job_complete(job.lease, outcome.result, report)  # noqa: E731
        else:
            error = dict(outcome.error or error_info("Error", outcome.status.value))
            failure = {
                "type": error.get("type", "Error"),
                "message": error.get("message", ""),
                "traceback": error.get("traceback", ""),
                "status": outcome.status.value,
            }
            retryable = outcome.status not in _NOT_RETRYABLE
            op = lambda: ops.job_fail(job.lease, failure, report, retryable=retryable)  # noqa: E731
        verdict = await self._report_until_known(op, job)
        self.events.emit(
            "job_finished" if verdict is Fenced.ACCEPTED else "job_dropped",
            job=job.lease.job_id,
            status=outcome.status.value,
            stopped=running.stopped_because or "",
            seconds=round(time.monotonic() - running.started, 3),
            peak_rss_mib=round((outcome.peak_rss_bytes or 0) / 2**20, 1),
            error=(outcome.error or {}).get("message", "")[:200] if outcome.error else "",
        )

    async def _report_until_known(self, op: Callable[[], Op[Fenced]], job: ClaimedJob) -> Fenced:
        """Report, riding out a store outage; after the lease has surely expired, give up."""
        delay = 0.05
        deadline = time.monotonic() + 2 * self.settings.lease_seconds
        while True:
            try:
                verdict: Fenced = await self._run(op())
                return verdict
            except errors.InvalidJob as exc:
                # The result cannot be stored (e.g. not JSON after all): fail the job instead.
                op = _result_invalid(job, str(exc))
            except errors.StoreError as exc:
                if time.monotonic() > deadline:
                    log.warning("giving up reporting job %s: %s", job.lease.job_id, exc)
                    return Fenced.LEASE_LOST
                self.events.emit("store_unavailable", worker=self.worker_id, error=str(exc))
                await anyio.sleep(delay)
                delay = min(delay * 2, _REPORT_BACKOFF_CAP)

    # -- heartbeat

    async def _heartbeat_loop(self) -> None:
        while not self.stopped.is_set():
            leases = [running.job.lease for running in self.running.values()]
            try:
                beat = await self._run(
                    ops.job_heartbeat(
                        self.worker_id, leases, lease_seconds=self.settings.lease_seconds
                    )
                )
            except errors.StoreError as exc:
                self.events.emit("store_unavailable", worker=self.worker_id, error=str(exc))
            else:
                for lease in beat.lost:
                    running = self.running.get(lease.job_id)
                    if running is not None and running.job.lease == lease:
                        self.events.emit("lease_lost", job=lease.job_id)
                        running.stop(StopReason.LEASE_GONE)
            with anyio.move_on_after(self.settings.heartbeat_seconds):
                await self.stopped.wait()


def _result_invalid(job: ClaimedJob, message: str) -> Callable[[], Op[Fenced]]:
    failure = {"type": "ResultInvalid", "message": message, "status": Status.RESULT_INVALID.value}
    return lambda: ops.job_fail(job.lease, failure, retryable=False)
