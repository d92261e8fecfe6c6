"""The Python API: submit jobs, wait for results, look around, and run the queues.

``Client`` blocks; ``AsyncClient`` awaits. Every request of either is built
once, as a plan, in :class:`taskq.broker.client.client_base.ClientBase`; each method
here is one line that hands that plan to its runner. The ``taskq`` command and
the console go through these clients too.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, TypeVar, overload, runtime_checkable

import anyio
import anyio.to_thread

from taskq import errors
from taskq.broker import schedule_timing
from taskq.broker.client import group_commit
from taskq.broker.client.client_base import (
    Calls,
    ClientBase,
    Target,
    call_spec,
    default_submitter,
    python_exec_spec,
    shell_spec,
    validate_spec,
)
from taskq.broker.client.group_commit import GroupOp, Signal
from taskq.broker.ops.jobs import CancelResult, ExecutionStats, Histogram, ThroughputBucket
from taskq.broker.ops.queues import KEEP, Keep, SubmitLimit
from taskq.broker.ops.schedules import Schedule, ScheduleAdded
from taskq.broker.records import Execution, Job, JobSpec, JobState, QueueStats, WorkerInfo
from taskq.broker.stores.store import NodeInfo
from taskq.retry import RetryPolicy

__all__ = [
    "KEEP",
    "AsyncClient",
    "AsyncJobHandle",
    "CancelResult",
    "Client",
    "ExecutionStats",
    "Histogram",
    "JobHandle",
    "Keep",
    "Schedule",
    "ScheduleAdded",
    "SubmitLimit",
    "ThroughputBucket",
    "call_spec",
    "default_submitter",
    "python_exec_spec",
    "shell_spec",
    "validate_spec",
]

T = TypeVar("T")
P = ParamSpec("P")


def _finished_result(job: Job) -> Any:
    if job.state is JobState.SUCCEEDED:
        return job.result
    error = job.error or {}
    detail = f"{error.get('type', 'Error')}: {error.get('message', '')}".strip(": ")
    raise errors.JobFailed(
        f"job {job.id} ended {job.state.value} after {job.attempts} attempt(s)"
        + (f": {detail}" if detail else ""),
        job=job,
    )


class JobHandle:
    """A submitted job: its id, and shortcuts to ask about it."""

    def __init__(self, client: Client, job_id: int) -> None:
        self.client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"JobHandle(id={self.id})"

    def status(self) -> JobState:
        """The job's state now."""
        return self.client.get(self.id).state

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job; its result, or :class:`taskq.errors.JobFailed` with its error."""
        return _finished_result(self.client.wait(self.id, timeout=timeout))

    def cancel(self) -> CancelResult:
        """Cancel the job (at once when queued, at the next heartbeat when running)."""
        return self.client.cancel(self.id)


class AsyncJobHandle:
    """A submitted job, for async code."""

    def __init__(self, client: AsyncClient, job_id: int) -> None:
        self.client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"AsyncJobHandle(id={self.id})"

    async def status(self) -> JobState:
        """The job's state now."""
        return (await self.client.get(self.id)).state

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the job; its result, or :class:`taskq.errors.JobFailed` with its error."""
        return _finished_result(await self.client.wait(self.id, timeout=timeout))

    async def cancel(self) -> CancelResult:
        """Cancel the job (at once when queued, at the next heartbeat when running)."""
        return await self.client.cancel(self.id)


@runtime_checkable
class AsyncNodes(Protocol):
    """A store that can describe its nodes without blocking (rqlite)."""

    async def nodes_async(self) -> list[NodeInfo]:
        """Describe the members of the store."""
        ...


class Client(ClientBase):
    """A blocking client: ``taskq.Client()`` uses the default store (see README).

    ``Client(store=store)`` talks to a store already opened with options of
    its own (read-only, without migration); closing the client closes it.
    """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def _run(self, op: GroupOp[T]) -> T:
        return group_commit.run(self.store, op)

    # -- jobs ---------------------------------------------------------------------

    @overload
    def submit(self, target: str, /, *args: Any, **options: Any) -> JobHandle: ...
    @overload
    def submit(
        self, target: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> JobHandle: ...
    def submit(self, target: Target, /, *args: Any, **keywords: Any) -> JobHandle:
        """Enqueue a call of ``target`` with JSON arguments.

        ``target`` is a declared job (:func:`taskq.job`) or a module-level
        function: every argument is the call's, and the options are those the
        job was declared with (``client.submit(resize.options(queue="gpu"), ...)``
        changes them). Or ``"pkg.module:function"``, the low-level form: its
        keyword arguments are the options of :func:`call_spec`, the call's own
        go in ``kwargs={...}``.
        """
        return JobHandle(self, self._run(self._submit_plan(target, args, keywords)))

    def submit_python(
        self,
        code: str,
        function: str,
        *args: Any,
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> JobHandle:
        """Enqueue ``code``'s ``function(*args, **kwargs)`` (see :func:`python_exec_spec`)."""
        plan = self._submit_python_plan(code, function, args, {"kwargs": kwargs, **options})
        return JobHandle(self, self._run(plan))

    def submit_shell(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> JobHandle:
        """Enqueue a command: a string runs in ``/bin/sh -c`` (see :func:`shell_spec`)."""
        return JobHandle(self, self._run(self._submit_shell_plan(command, cwd, env, options)))

    def submit_spec(self, spec: JobSpec) -> JobHandle:
        """Enqueue one job as described (build it with :func:`call_spec`)."""
        return JobHandle(self, self._run(self._submit_spec_plan(spec)))

    @overload
    def submit_many(self, specs: Sequence[JobSpec], /) -> list[JobHandle]: ...
    @overload
    def submit_many(self, target: Target, calls: Calls, /) -> list[JobHandle]: ...
    def submit_many(
        self, jobs: Sequence[JobSpec] | Target, calls: Calls | None = None, /
    ) -> list[JobHandle]:
        """Enqueue many jobs in one request: all or none.

        ``submit_many(resize, [("a.png", 800), {"path": "b.png"}])`` calls a
        target (as :meth:`submit` takes it) once per item, a tuple of
        positional or a dict of keyword arguments; ``submit_many(specs)``
        takes jobs built with :func:`call_spec` and its kin.
        """
        ids = self._run(self._submit_many_plan(self._many_specs(jobs, calls)))
        return [JobHandle(self, job_id) for job_id in ids]

    def get(self, job_id: int) -> Job:
        """The job, or :class:`taskq.errors.JobNotFound`."""
        return self._run(self._get_plan(job_id))

    def wait(self, job_id: int, *, timeout: float | None = None) -> Job:
        """Wait until the job finishes, whatever its outcome."""
        return self._run(self._wait_plan(job_id, timeout))

    def list(self, **filters: Any) -> builtins.list[Job]:
        """Jobs newest first; filters as in :func:`taskq.broker.ops.jobs.job_list`.

        ``state`` is a :class:`JobState` or its name (``state="succeeded"``).
        """
        return self._run(self._list_plan(filters))

    def executions(self, job_id: int) -> builtins.list[Execution]:
        """Every attempt at a job, oldest first."""
        return self._run(self._executions_plan(job_id))

    def worker_executions(
        self, worker_id: str, *, before: int | None = None, limit: int = 50
    ) -> builtins.list[Execution]:
        """A worker's attempts, newest first; pass the last id seen as ``before`` for more."""
        return self._run(self._worker_executions_plan(worker_id, before, limit))

    def cancel(self, *job_ids: int) -> CancelResult:
        """Cancel jobs: queued ones at once, running ones at their next heartbeat."""
        return self._run(self._cancel_plan(job_ids))

    def retry(self, *job_ids: int) -> builtins.list[int]:
        """Queue failed, dead or cancelled jobs again; the ids that moved."""
        return self._run(self._retry_plan(job_ids))

    # -- queues and limits ----------------------------------------------------------

    def stats(self) -> builtins.list[QueueStats]:
        """Every queue: its counts per state, whether it is paused, its limits."""
        return self._run(self._stats_plan())

    def pause(self, queue: str, *, create: bool = False) -> None:
        """Stop workers from claiming the queue's jobs.

        A queue without jobs or settings is refused (a misspelt name would
        become a new paused queue) unless ``create``: to pause it ahead of its
        first job.
        """
        self._run(self._pause_plan(queue, True, create))

    def resume(self, queue: str, *, create: bool = False) -> None:
        """Let workers claim the queue's jobs again (unknown queues as for :meth:`pause`)."""
        self._run(self._pause_plan(queue, False, create))

    def set_queue_limits(
        self,
        queue: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate_limit: float | Keep | None = KEEP,
        rate_period: float = 1.0,
    ) -> None:
        """Cap a queue cluster-wide: ``max_running`` at once, ``rate_limit`` starts a period.

        ``None`` lifts a limit; one not given stays as it is.
        """
        self._run(self._set_queue_limits_plan(queue, max_running, rate_limit, rate_period))

    def set_queue_defaults(
        self,
        queue: str,
        *,
        timeout: float | Keep | None = KEEP,
        max_attempts: int | Keep | None = KEEP,
        limits: dict[str, Any] | Keep | None = KEEP,
        retry: RetryPolicy | dict[str, Any] | Keep | None = KEEP,
    ) -> None:
        """Set what the queue's jobs get when they say none: applied by every enqueue.

        ``None`` lifts a default; one not given stays. ``limits`` merge name by
        name (a limit given as None is lifted). Read them back in
        :meth:`stats` (``job_defaults``).
        """
        defaults = {"timeout": timeout, "max_attempts": max_attempts, "limits": limits}
        self._run(self._set_queue_defaults_plan(queue, {**defaults, "retry": retry}))

    def set_submit_limit(self, submitter: str, rate: float, period: float) -> None:
        """Let ``submitter`` ("*": all without a limit of their own) submit ``rate`` a period."""
        self._run(self._set_submit_limit_plan(submitter, rate, period))

    def remove_submit_limit(self, submitter: str) -> None:
        """Lift a submitter's own limit (the "*" limit, if any, applies again)."""
        self._run(self._remove_submit_limit_plan(submitter))

    def submit_limits(self) -> builtins.list[SubmitLimit]:
        """Every submitter's limit, "*" (everyone else) included."""
        return self._run(self._submit_limits_plan())

    # -- the fleet and the store ------------------------------------------------------

    def workers(self) -> builtins.list[WorkerInfo]:
        """Every registered worker, stopped ones included."""
        return self._run(self._workers_plan())

    def schema_version(self) -> int:
        """The newest schema migration the store has (any node's copy; 0: none)."""
        return self._run(self._schema_version_plan())

    def throughput(
        self, *, minutes: int = 15, now: float | None = None
    ) -> builtins.list[ThroughputBucket]:
        """Finished attempts per minute, oldest first, back from ``now`` (the store's clock)."""
        return self._run(self._throughput_plan(minutes, now))

    def execution_stats(self) -> ExecutionStats:
        """The store's totals: attempts' run time by outcome, jobs' pickup latency."""
        return self._run(self._execution_stats_plan())

    def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members: address, role, reachable or not."""
        return self.store.nodes()

    def prune(self, *, older_than: float) -> int:
        """Delete jobs finished more than ``older_than`` seconds ago; how many went."""
        return self._run(self._prune_plan(older_than))

    # -- schedules --------------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        spec: JobSpec,
        *,
        cron: str | None = None,
        every_seconds: float | None = None,
        timezone: str = "UTC",
        catch_up: schedule_timing.CatchUp = schedule_timing.CatchUp.ONCE,
        replace: bool = False,
    ) -> ScheduleAdded:
        """Submit ``spec`` on every tick of ``cron`` (read in ``timezone``) or ``every_seconds``.

        A taken name is an error unless ``replace``, or unless the schedule
        stands exactly as given (a set-up script may run twice).
        """
        op = self._add_schedule_plan(name, spec, cron, every_seconds, timezone, catch_up, replace)
        return self._run(op)

    def schedules(self) -> builtins.list[Schedule]:
        """Every schedule, by name, with its next fire time."""
        return self._run(self._schedules_plan())

    def remove_schedule(self, name: str) -> bool:
        """Delete a schedule; False when there is none of that name."""
        return self._run(self._remove_schedule_plan(name))

    def pause_schedule(self, name: str) -> bool:
        """Fire none of the schedule's ticks until resumed; False when there is none."""
        return self._run(self._pause_schedule_plan(name, True))

    def resume_schedule(self, name: str) -> bool:
        """Fire the schedule's ticks again; False when there is none of that name."""
        return self._run(self._pause_schedule_plan(name, False))


class AsyncClient(ClientBase):
    """The same client for async code: each method as :class:`Client`'s, awaited."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.store.aclose()

    async def _run(self, op: GroupOp[T]) -> T:
        return await group_commit.run_async(self.store, op)

    def _new_signal(self) -> Signal:
        return anyio.Event()

    # -- jobs ---------------------------------------------------------------------

    @overload
    async def submit(self, target: str, /, *args: Any, **options: Any) -> AsyncJobHandle: ...
    @overload
    async def submit(
        self, target: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncJobHandle: ...
    async def submit(self, target: Target, /, *args: Any, **keywords: Any) -> AsyncJobHandle:
        """Enqueue a call of ``target`` (see :meth:`Client.submit`)."""
        return AsyncJobHandle(self, await self._run(self._submit_plan(target, args, keywords)))

    async def submit_python(
        self,
        code: str,
        function: str,
        *args: Any,
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> AsyncJobHandle:
        """Enqueue ``code``'s ``function(*args, **kwargs)`` (see :func:`python_exec_spec`)."""
        plan = self._submit_python_plan(code, function, args, {"kwargs": kwargs, **options})
        return AsyncJobHandle(self, await self._run(plan))

    async def submit_shell(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> AsyncJobHandle:
        """Enqueue a command: a string runs in ``/bin/sh -c`` (see :func:`shell_spec`)."""
        plan = self._submit_shell_plan(command, cwd, env, options)
        return AsyncJobHandle(self, await self._run(plan))

    async def submit_spec(self, spec: JobSpec) -> AsyncJobHandle:
        """Enqueue one job as described (build it with :func:`call_spec`)."""
        return AsyncJobHandle(self, await self._run(self._submit_spec_plan(spec)))

    @overload
    async def submit_many(self, specs: Sequence[JobSpec], /) -> list[AsyncJobHandle]: ...
    @overload
    async def submit_many(self, target: Target, calls: Calls, /) -> list[AsyncJobHandle]: ...
    async def submit_many(
        self, jobs: Sequence[JobSpec] | Target, calls: Calls | None = None, /
    ) -> list[AsyncJobHandle]:
        """Enqueue many jobs in one request: all or none (see :meth:`Client.submit_many`)."""
        ids = await self._run(self._submit_many_plan(self._many_specs(jobs, calls)))
        return [AsyncJobHandle(self, job_id) for job_id in ids]

    async def get(self, job_id: int) -> Job:
        """The job, or :class:`taskq.errors.JobNotFound`."""
        return await self._run(self._get_plan(job_id))

    async def wait(self, job_id: int, *, timeout: float | None = None) -> Job:
        """Wait until the job finishes, whatever its outcome."""
        return await self._run(self._wait_plan(job_id, timeout))

    async def list(self, **filters: Any) -> builtins.list[Job]:
        """Jobs newest first; filters as for :meth:`Client.list`."""
        return await self._run(self._list_plan(filters))

    async def executions(self, job_id: int) -> builtins.list[Execution]:
        """Every attempt at a job, oldest first."""
        return await self._run(self._executions_plan(job_id))

    async def worker_executions(
        self, worker_id: str, *, before: int | None = None, limit: int = 50
    ) -> builtins.list[Execution]:
        """A worker's attempts, newest first; pass the last id seen as ``before`` for more."""
        return await self._run(self._worker_executions_plan(worker_id, before, limit))

    async def cancel(self, *job_ids: int) -> CancelResult:
        """Cancel jobs: queued ones at once, running ones at their next heartbeat."""
        return await self._run(self._cancel_plan(job_ids))

    async def retry(self, *job_ids: int) -> builtins.list[int]:
        """Queue failed, dead or cancelled jobs again; the ids that moved."""
        return await self._run(self._retry_plan(job_ids))

    # -- queues and limits ----------------------------------------------------------

    async def stats(self) -> builtins.list[QueueStats]:
        """Every queue: its counts per state, whether it is paused, its limits."""
        return await self._run(self._stats_plan())

    async def pause(self, queue: str, *, create: bool = False) -> None:
        """Stop workers from claiming the queue's jobs (see :meth:`Client.pause`)."""
        await self._run(self._pause_plan(queue, True, create))

    async def resume(self, queue: str, *, create: bool = False) -> None:
        """Let workers claim the queue's jobs again (see :meth:`Client.pause`)."""
        await self._run(self._pause_plan(queue, False, create))

    async def set_queue_limits(
        self,
        queue: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate_limit: float | Keep | None = KEEP,
        rate_period: float = 1.0,
    ) -> None:
        """Cap a queue cluster-wide (see :meth:`Client.set_queue_limits`)."""
        await self._run(self._set_queue_limits_plan(queue, max_running, rate_limit, rate_period))

    async def set_queue_defaults(
        self,
        queue: str,
        *,
        timeout: float | Keep | None = KEEP,
        max_attempts: int | Keep | None = KEEP,
        limits: dict[str, Any] | Keep | None = KEEP,
        retry: RetryPolicy | dict[str, Any] | Keep | None = KEEP,
    ) -> None:
        """Set a queue's job defaults (see :meth:`Client.set_queue_defaults`)."""
        defaults = {"timeout": timeout, "max_attempts": max_attempts, "limits": limits}
        await self._run(self._set_queue_defaults_plan(queue, {**defaults, "retry": retry}))

    async def set_submit_limit(self, submitter: str, rate: float, period: float) -> None:
        """Let ``submitter`` ("*": all without a limit of their own) submit ``rate`` a period."""
        await self._run(self._set_submit_limit_plan(submitter, rate, period))

    async def remove_submit_limit(self, submitter: str) -> None:
        """Lift a submitter's own limit (the "*" limit, if any, applies again)."""
        await self._run(self._remove_submit_limit_plan(submitter))

    async def submit_limits(self) -> builtins.list[SubmitLimit]:
        """Every submitter's limit, "*" (everyone else) included."""
        return await self._run(self._submit_limits_plan())

    # -- the fleet and the store ------------------------------------------------------

    async def workers(self) -> builtins.list[WorkerInfo]:
        """Every registered worker, stopped ones included."""
        return await self._run(self._workers_plan())

    async def schema_version(self) -> int:
        """The newest schema migration the store has (any node's copy; 0: none)."""
        return await self._run(self._schema_version_plan())

    async def throughput(
        self, *, minutes: int = 15, now: float | None = None
    ) -> builtins.list[ThroughputBucket]:
        """Finished attempts per minute, oldest first, back from ``now`` (the store's clock)."""
        return await self._run(self._throughput_plan(minutes, now))

    async def execution_stats(self) -> ExecutionStats:
        """The store's totals: attempts' run time by outcome, jobs' pickup latency."""
        return await self._run(self._execution_stats_plan())

    async def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members; an embedded store describes itself in a thread."""
        if isinstance(self.store, AsyncNodes):
            return await self.store.nodes_async()
        return await anyio.to_thread.run_sync(self.store.nodes)

    async def prune(self, *, older_than: float) -> int:
        """Delete jobs finished more than ``older_than`` seconds ago; how many went."""
        return await self._run(self._prune_plan(older_than))

    # -- schedules --------------------------------------------------------------------

    async def add_schedule(
        self,
        name: str,
        spec: JobSpec,
        *,
        cron: str | None = None,
        every_seconds: float | None = None,
        timezone: str = "UTC",
        catch_up: schedule_timing.CatchUp = schedule_timing.CatchUp.ONCE,
        replace: bool = False,
    ) -> ScheduleAdded:
        """Submit ``spec`` on every tick (see :meth:`Client.add_schedule`)."""
        op = self._add_schedule_plan(name, spec, cron, every_seconds, timezone, catch_up, replace)
        return await self._run(op)

    async def schedules(self) -> builtins.list[Schedule]:
        """Every schedule, by name, with its next fire time."""
        return await self._run(self._schedules_plan())

    async def remove_schedule(self, name: str) -> bool:
        """Delete a schedule; False when there is none of that name."""
        return await self._run(self._remove_schedule_plan(name))

    async def pause_schedule(self, name: str) -> bool:
        """Fire none of the schedule's ticks until resumed; False when there is none."""
        return await self._run(self._pause_schedule_plan(name, True))

    async def resume_schedule(self, name: str) -> bool:
        """Fire the schedule's ticks again; False when there is none of that name."""
        return await self._run(self._pause_schedule_plan(name, False))
