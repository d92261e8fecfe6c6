"""The Python API: submit jobs, wait for results, look around, and run the queues.

``Client`` blocks; ``AsyncClient`` awaits. Every request but a submit is
declared once, with its plan, in :mod:`taskq.broker.client.operations`, and
each client reads it as a method of its own kind; the submits, which return
a handle of the client's kind, are written here for each (a unit test holds
the two clients' signatures equal). The ``taskq`` command and the console go
through these clients too.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, overload, runtime_checkable

import anyio
import anyio.to_thread

from taskq.broker.client.client_base import (
    Calls,
    JobRef,
    Target,
    call_spec,
    default_submitter,
    python_exec_spec,
    shell_spec,
    validate_spec,
)
from taskq.broker.client.flows import Flow, group, step
from taskq.broker.client.handles import (
    AsyncJobHandle,
    AsyncWorkflowHandle,
    JobHandle,
    WorkflowHandle,
)
from taskq.broker.client.operations import Awaiting, Blocking, JobQuery, Operations
from taskq.broker.ops.functions import DeclaredFunction
from taskq.broker.ops.jobs import CancelResult, ExecutionStats, Histogram, ThroughputBucket
from taskq.broker.ops.queues import KEEP, Keep, SubmitLimit
from taskq.broker.ops.schedules import Schedule, ScheduleAdded
from taskq.broker.records import JobSpec
from taskq.broker.stores.store import NodeInfo

__all__ = [
    "KEEP",
    "AsyncClient",
    "AsyncJobHandle",
    "AsyncWorkflowHandle",
    "CancelResult",
    "Client",
    "DeclaredFunction",
    "ExecutionStats",
    "Flow",
    "Histogram",
    "JobHandle",
    "JobQuery",
    "JobRef",
    "Keep",
    "Schedule",
    "ScheduleAdded",
    "SubmitLimit",
    "ThroughputBucket",
    "WorkflowHandle",
    "call_spec",
    "default_submitter",
    "group",
    "python_exec_spec",
    "shell_spec",
    "step",
    "validate_spec",
]

P = ParamSpec("P")


@runtime_checkable
class AsyncNodes(Protocol):
    """A store that can describe its nodes without blocking (rqlite)."""

    async def nodes_async(self) -> list[NodeInfo]:
        """Describe the members of the store."""
        ...


class Client(Blocking, Operations):
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
        changes them). Or ``"pkg.module:function"``, by name: its keyword
        arguments are the options of :func:`call_spec`, the call's own go in
        ``kwargs={...}``; the options its workers declare are the defaults
        and the arguments are checked against the declared signature
        (:mod:`taskq.broker.client.declarations`). A name no worker has
        declared raises :class:`taskq.errors.UnknownFunction`, unless
        ``unchecked=True``, which submits it with the options given alone.
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

    def submit_workflow(
        self, flow: Flow, /, *, name: str = "", idempotency_key: str | None = None
    ) -> WorkflowHandle:
        """Enqueue a whole workflow in one request: every job and dependency, or nothing.

        ``flow`` is built from steps (``resize.map(paths).then(build_index)``,
        see :mod:`taskq.broker.client.flows`). The same ``idempotency_key``
        with the same flow returns the same workflow, with another it is
        refused (:class:`taskq.errors.IdempotencyConflict`).
        """
        submitted = self._run(self._submit_workflow_plan(flow, name, idempotency_key))
        return WorkflowHandle(self, submitted, flow)

    def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members: address, role, reachable or not."""
        return self.store.nodes()


class AsyncClient(Awaiting, Operations):
    """The same client for async code: each method as :class:`Client`'s, awaited."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.store.aclose()

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

    async def submit_workflow(
        self, flow: Flow, /, *, name: str = "", idempotency_key: str | None = None
    ) -> AsyncWorkflowHandle:
        """Enqueue a whole workflow in one request (see :meth:`Client.submit_workflow`)."""
        submitted = await self._run(self._submit_workflow_plan(flow, name, idempotency_key))
        return AsyncWorkflowHandle(self, submitted, flow)

    async def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members; an embedded store describes itself in a thread."""
        if isinstance(self.store, AsyncNodes):
            return await self.store.nodes_async()
        return await anyio.to_thread.run_sync(self.store.nodes)
