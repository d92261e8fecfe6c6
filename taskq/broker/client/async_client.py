"""The async client, ``AsyncClient``, and the handles its submits return (see :mod:`.client`)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Protocol, Self, overload, runtime_checkable

import anyio
import anyio.to_thread

from taskq.broker.client import http_fleet_plans, specs
from taskq.broker.client.client_base import Jobs
from taskq.broker.client.faces import Awaiting
from taskq.broker.client.flows import Flow, as_flow, part_of
from taskq.broker.client.handle_base import (
    SubmittedFlow,
    deadline_after,
    end_results,
    finished_result,
    remaining_seconds,
    stored_flow,
)
from taskq.broker.client.operations import Operations
from taskq.broker.client.specs import Calls, SubmittedJob, Target
from taskq.broker.ops.jobs import CancelResult
from taskq.broker.records import JobSpec, JobState, SubmittedWorkflow, WorkflowInfo
from taskq.broker.stores.store import NodeInfo

P = ParamSpec("P")


class AsyncJobHandle(SubmittedJob):
    """A submitted job, for async code."""

    def __init__(self, client: AsyncClient, job_id: int) -> None:
        self.client: AsyncClient = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"AsyncJobHandle(id={self.id})"

    async def status(self) -> JobState:
        """The job's state now."""
        return (await self.client.get(self.id)).state

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the job; its result, or :class:`taskq.errors.JobFailed` with its error."""
        return finished_result(await self.client.wait(self.id, timeout=timeout))

    async def cancel(self) -> CancelResult:
        """Cancel the job (at once when queued, at the next heartbeat when running)."""
        return await self.client.cancel(self.id)


class AsyncWorkflowHandle(SubmittedFlow):
    """A submitted workflow, for async code (see :class:`WorkflowHandle`)."""

    def __init__(
        self,
        client: AsyncClient,
        submitted: SubmittedWorkflow,
        flow: Flow | None,
        end_ids: Sequence[int] = (),
    ) -> None:
        super().__init__(submitted, flow, end_ids)
        self.client = client

    async def jobs(self, part: Flow | Target | None = None) -> list[AsyncJobHandle]:
        """The handles of ``part``'s steps (a flow this one was built from, or a declared job
        given bare), without a read; else of every job of the workflow as the store has it
        now (see :meth:`WorkflowHandle.jobs`).
        """
        if part is not None:
            found = self._ids(part_of(part, self._flow))
            return [AsyncJobHandle(self.client, job_id) for job_id in found]
        # job_ids holds the jobs submitted with the flow; spawned ones join it later.
        return [
            AsyncJobHandle(self.client, job.id) for job in await self.client.workflow_jobs(self.id)
        ]

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the flow's last step; its result (see :meth:`WorkflowHandle.result`)."""
        deadline = deadline_after(timeout)
        ends = [
            await self.client.wait(job_id, timeout=remaining_seconds(deadline))
            for job_id in self._end_ids()
        ]
        return end_results(ends)

    async def wait(self, timeout: float | None = None) -> WorkflowInfo:
        """Wait until every job of the workflow has ended, spawned ones included."""
        return await self.client.wait_workflow(self.id, timeout=timeout)

    async def info(self) -> WorkflowInfo:
        """The workflow now: its jobs' counts per state."""
        return await self.client.workflow(self.id)

    async def cancel(self) -> int:
        """Cancel every unfinished job of the workflow; how many."""
        return await self.client.cancel_workflow(self.id)

    async def retry(self) -> int:
        """Queue the workflow's failed, dead or cancelled jobs again; how many."""
        return await self.client.retry_workflow(self.id)


@runtime_checkable
class AsyncNodes(Protocol):
    """A store that can describe its nodes without blocking (rqlite)."""

    async def nodes_async(self) -> list[NodeInfo]:
        """Describe the members of the store."""
        ...


class AsyncClient(Awaiting, Operations):
    """The same client for async code: each method as :class:`Client`'s, awaited."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        else:
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
    async def submit_many(self, specs: Jobs, /) -> list[AsyncJobHandle]: ...
    @overload
    async def submit_many(
        self, target: Target, calls: Calls, /, *, unchecked: bool = False
    ) -> list[AsyncJobHandle]: ...
    async def submit_many(
        self,
        jobs: Jobs | Target,
        calls: Calls | None = None,
        /,
        *,
        unchecked: bool = False,
    ) -> list[AsyncJobHandle]:
        """Enqueue many jobs in one request: all or none (see :meth:`Client.submit_many`)."""
        ids = await self._run(self._submit_calls_plan(jobs, calls, unchecked))
        return [AsyncJobHandle(self, job_id) for job_id in ids]

    async def submit_workflow(
        self,
        flow: Flow | Target,
        /,
        *,
        name: str = "",
        idempotency_key: str | None = None,
        submitter: str | None = None,
    ) -> AsyncWorkflowHandle:
        """Enqueue a whole workflow in one request (see :meth:`Client.submit_workflow`)."""
        whole = as_flow(flow)
        submitted = await self._run(
            self._submit_workflow_plan(whole, name, idempotency_key, submitter)
        )
        return AsyncWorkflowHandle(self, submitted, whole)

    async def workflow_handle(self, workflow_id: int) -> AsyncWorkflowHandle:
        """A handle of a workflow submitted before (see :meth:`Client.workflow_handle`)."""
        asked = specs.workflow_id(workflow_id)
        submitted, ends = stored_flow(
            asked, await self.workflow_jobs(asked), await self.workflow_edges(asked)
        )
        return AsyncWorkflowHandle(self, submitted, None, ends)

    async def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members (over HTTP, as the server sees them); an embedded store
        describes itself in a thread."""
        if self.http is not None:
            return await self.http.run_async(http_fleet_plans.store_nodes())
        if isinstance(self.store, AsyncNodes):
            return await self.store.nodes_async()
        return await anyio.to_thread.run_sync(self.store.nodes)
