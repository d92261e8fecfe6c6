"""The blocking client, ``Client``, and the handles its submits return (see :mod:`.client`)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ParamSpec, Self, overload

from taskq.broker.client import http_fleet_plans, specs
from taskq.broker.client.client_base import Jobs
from taskq.broker.client.faces import Blocking
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


class JobHandle(SubmittedJob):
    """A submitted job: its id, and shortcuts to ask about it."""

    def __init__(self, client: Client, job_id: int) -> None:
        self.client: Client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"JobHandle(id={self.id})"

    def status(self) -> JobState:
        """The job's state now."""
        return self.client.get(self.id).state

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job; its result, or :class:`taskq.errors.JobFailed` with its error."""
        return finished_result(self.client.wait(self.id, timeout=timeout))

    def cancel(self) -> CancelResult:
        """Cancel the job (at once when queued, at the next heartbeat when running)."""
        return self.client.cancel(self.id)


class WorkflowHandle(SubmittedFlow):
    """A submitted workflow: its id, its jobs, and shortcuts to wait for it and steer it."""

    def __init__(
        self,
        client: Client,
        submitted: SubmittedWorkflow,
        flow: Flow | None,
        end_ids: Sequence[int] = (),
    ) -> None:
        super().__init__(submitted, flow, end_ids)
        self.client = client

    def jobs(self, part: Flow | Target | None = None) -> list[JobHandle]:
        """The handles of ``part``'s steps (a flow this one was built from, or a declared job
        given bare, its one step without arguments: :func:`~taskq.broker.client.flows.part_of`),
        without a read; else of every job of the workflow as the store has it now, by id,
        those its running jobs spawned included (:meth:`Client.workflow_jobs`, one read).

        :class:`taskq.errors.WorkflowNotFound` once the store has pruned it all.
        """
        if part is not None:
            found = self._ids(part_of(part, self._flow))
            return [JobHandle(self.client, job_id) for job_id in found]
        # job_ids holds the jobs submitted with the flow; spawned ones join it later.
        return [JobHandle(self.client, job.id) for job in self.client.workflow_jobs(self.id)]

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the flow's last step; its result (a list, when it ends in several).

        :class:`taskq.errors.JobFailed` when one of them did not succeed.
        Jobs the flow's steps spawn while running may still run: :meth:`wait`
        waits for those too.
        """
        deadline = deadline_after(timeout)
        ends = [
            self.client.wait(job_id, timeout=remaining_seconds(deadline))
            for job_id in self._end_ids()
        ]
        return end_results(ends)

    def wait(self, timeout: float | None = None) -> WorkflowInfo:
        """Wait until every job of the workflow has ended, spawned ones included."""
        return self.client.wait_workflow(self.id, timeout=timeout)

    def info(self) -> WorkflowInfo:
        """The workflow now: its jobs' counts per state."""
        return self.client.workflow(self.id)

    def cancel(self) -> int:
        """Cancel every unfinished job of the workflow; how many."""
        return self.client.cancel_workflow(self.id)

    def retry(self) -> int:
        """Queue the workflow's failed, dead or cancelled jobs again; how many."""
        return self.client.retry_workflow(self.id)


class Client(Blocking, Operations):
    """A blocking client: ``taskq.Client()`` uses the default store (see README).

    ``Client("https://host:8080", token=...)`` speaks to a ``taskq serve``
    instead, with the same methods and errors (those that need the store
    raise :class:`taskq.errors.NotOverHttp`).

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
        if self.http is not None:
            self.http.close()
        else:
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
    def submit_many(self, specs: Jobs, /) -> list[JobHandle]: ...
    @overload
    def submit_many(
        self, target: Target, calls: Calls, /, *, unchecked: bool = False
    ) -> list[JobHandle]: ...
    def submit_many(
        self,
        jobs: Jobs | Target,
        calls: Calls | None = None,
        /,
        *,
        unchecked: bool = False,
    ) -> list[JobHandle]:
        """Enqueue many jobs in one request: all or none.

        ``submit_many(resize, [("a.png", 800), {"path": "b.png"}])`` calls a
        target (as :meth:`submit` takes it) once per item, a tuple of
        positional or a dict of keyword arguments; ``submit_many(jobs)``
        takes jobs built with :func:`call_spec` and its kin, as built, and
        calls by name (:class:`NamedCall`, each resolved as :meth:`submit`
        resolves a name, its ``where`` naming it in a refusal; over HTTP the
        server names it by its place), in any mix.

        The calls of a ``"pkg.mod:f"`` are submitted as :meth:`submit` would
        submit each (the declared options, the arguments checked against the
        declared parameters), all or none: the first call refused raises,
        naming it (``call 3: ...``), and nothing is written. A name no worker
        has declared raises :class:`taskq.errors.UnknownFunction`, unless
        ``unchecked=True``.
        """
        ids = self._run(self._submit_calls_plan(jobs, calls, unchecked))
        return [JobHandle(self, job_id) for job_id in ids]

    def submit_workflow(
        self,
        flow: Flow | Target,
        /,
        *,
        name: str = "",
        idempotency_key: str | None = None,
        submitter: str | None = None,
    ) -> WorkflowHandle:
        """Enqueue a whole workflow in one request: every job and dependency, or nothing.

        ``flow`` is built from steps (``resize.map(paths).then(build_index)``,
        see :mod:`taskq.broker.client.flows`); a declared job given bare
        (``submit_workflow(cleanup)``) is a flow of one step without
        arguments. The same ``idempotency_key`` with the same flow returns the
        same workflow, with another it is refused
        (:class:`taskq.errors.IdempotencyConflict`). ``submitter``
        (default: the client's) is who the workflow, and those of its jobs that
        name no submitter, are recorded as submitted by: the HTTP API's caller.
        """
        whole = as_flow(flow)
        submitted = self._run(self._submit_workflow_plan(whole, name, idempotency_key, submitter))
        return WorkflowHandle(self, submitted, whole)

    def workflow_handle(self, workflow_id: int) -> WorkflowHandle:
        """A handle of a workflow submitted before, by this process or another: its
        ``result``, ``wait``, ``cancel`` and the rest, as :meth:`submit_workflow` returns.

        Read back from the store (two reads), it knows the jobs the workflow's
        submit wrote (``job_ids``; not those spawned by them or joined later with
        ``after=``) and its last steps, those no other of them runs after, whose
        results ``result()`` gives; not the flow, so ``jobs()`` takes no part.
        :class:`taskq.errors.WorkflowNotFound` for an id no workflow has, or one
        the store has pruned.
        """
        asked = specs.workflow_id(workflow_id)
        submitted, ends = stored_flow(asked, self.workflow_jobs(asked), self.workflow_edges(asked))
        return WorkflowHandle(self, submitted, None, ends)

    def nodes(self) -> builtins.list[NodeInfo]:
        """The store's members: address, role, reachable or not (over HTTP, as the server
        sees them)."""
        if self.http is not None:
            return self.http.run(http_fleet_plans.store_nodes())
        return self.store.nodes()
