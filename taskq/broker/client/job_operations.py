"""The requests about jobs and workflows: read, wait, follow, steer (see :mod:`.operations`).

:class:`JobQuery` (:mod:`.job_query`) is the typed listing :meth:`JobOperations.list` takes.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from taskq import errors
from taskq.broker.client import http_plans, specs
from taskq.broker.client.client_base import ClientBase
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.faces import Operation, Pages, over_http, paged_over_http
from taskq.broker.client.group_commit import GroupOp
from taskq.broker.client.handle_base import checked_timeout
from taskq.broker.client.http_output import OutputOverHttp
from taskq.broker.client.job_query import JobQuery, filters_in_a_query
from taskq.broker.client.retry_result import RetryResult
from taskq.broker.client.specs import JobRef
from taskq.broker.ops.job_waits import (
    QUEUED_LOOKED_AT,
    job_wait,
    note_queued,
    note_time,
    workflow_wait_ran_out,
)
from taskq.broker.ops.jobs import (
    CancelResult,
    execution_list,
    execution_list_by_worker,
    job_cancel,
    job_check_ids,
    job_get,
    job_list,
    job_retry_reviving,
)
from taskq.broker.ops.output import OutputReader
from taskq.broker.ops.plan import Op
from taskq.broker.ops.relatives import job_relatives
from taskq.broker.ops.workers import worker_list
from taskq.broker.ops.workflows import (
    workflow_cancel,
    workflow_edges,
    workflow_get,
    workflow_jobs,
    workflow_list,
    workflow_retry,
)
from taskq.broker.records import (
    Execution,
    Job,
    JobBrief,
    JobEdge,
    JobSpec,
    JobState,
    OutputEvent,
    Relatives,
    WorkflowInfo,
    WorkflowStatus,
)
from taskq.broker.stores.trampoline import Pause


class JobOperations(ClientBase):
    """The requests about jobs and workflows, each as the plan of its answer."""

    # -- jobs ---------------------------------------------------------------------

    # Each request about a job takes it as after= does (specs.job_id): its id, its
    # handle or its record, and refuses anything else, a workflow's handle included.

    @over_http(http_plans.job_get)
    def get(self, job_id: JobRef) -> GroupOp[Job]:
        """The job, or :class:`taskq.errors.JobNotFound`."""
        asked = specs.job_id(job_id, "get")
        job = yield from job_get(asked)
        if job is None:
            raise errors.JobNotFound(f"no job with id {asked}")
        return job

    @over_http(http_plans.job_wait)
    def wait(self, job_id: JobRef, *, timeout: float | None = None) -> GroupOp[Job]:
        """Wait until the job finishes, whatever its outcome.

        A few seconds in, a job still queued with no active worker to run it (or held by
        its queue) is said once on the ``taskq.waits`` logger, with how to start one.
        """
        asked = specs.job_id(job_id, "wait")
        timeout = checked_timeout(timeout)
        return job_wait(asked, timeout=timeout, notes=self.wait_notes)

    @over_http(http_plans.job_list)
    @filters_in_a_query
    def list(self, query: JobQuery | None = None) -> GroupOp[builtins.list[Job]]:
        """Jobs newest first, as ``query`` (a :class:`JobQuery`) selects them; None: any 50."""
        # JobQuery's fields are job_list's keywords (tests/unit/test_client_faces.py).
        return job_list(**msgspec.structs.asdict(query or JobQuery()))

    @over_http(http_plans.execution_list)
    def executions(self, job_id: JobRef) -> GroupOp[builtins.list[Execution]]:
        """Every attempt at a job, oldest first."""
        return execution_list(job_id=specs.job_id(job_id, "executions"))

    @paged_over_http(OutputOverHttp)
    def output(
        self,
        job_id: JobRef,
        *,
        attempt: int | None = None,
        run: int | None = None,
        start: int = 0,
        follow: bool = False,
        poll_seconds: float = 0.25,
    ) -> Pages[OutputEvent]:
        """The job's output (stdout, stderr and logging), piece by piece as it is stored.

        Yields :class:`taskq.OutputText` pieces, an :class:`taskq.OutputDropped`
        where output was not kept (the oldest past the attempt's cap), and an
        :class:`taskq.AttemptEnded` once an attempt is over and all its output
        was read. ``attempt``: the number of the attempt to begin with (the
        latest by default); ``run``: which run of it, counted from 1 (a worker's
        hand-back runs the attempt again under its number; by default its
        latest); ``start``: the byte of its output to begin at (to resume, a
        piece's ``attempt``, ``run`` and ``end``). Not following, it yields
        what that attempt has stored now; following, it waits for more
        (polling every ``poll_seconds`` at most) and goes on to each later
        attempt as it starts, until the job ends.
        """
        return OutputReader(
            specs.job_id(job_id, "output"),
            attempt=attempt,
            run=run,
            start=start,
            follow=follow,
            poll_seconds=poll_seconds,
        )

    @over_http(http_plans.worker_executions)
    def worker_executions(
        self, worker_id: str, *, before: int | None = None, limit: int = 50
    ) -> GroupOp[builtins.list[Execution]]:
        """A worker's attempts, newest first; pass the last id seen as ``before`` for more.

        An id no worker has had raises :class:`taskq.errors.WorkerNotFound`; a worker
        whose row was pruned still lists the attempts the store kept.
        """
        return execution_list_by_worker(worker_id, before=before, limit=limit)

    @over_http(http_plans.job_cancel)
    def cancel(self, *job_ids: JobRef) -> GroupOp[CancelResult]:
        """Cancel jobs: queued ones at once, running ones at their next heartbeat.

        An id no job has raises :class:`taskq.errors.JobNotFound` naming it (the
        first such in the order given), and then no job is cancelled, over HTTP
        too (one request, at most 1000 ids).
        """
        asked = specs.job_ids(job_ids, "cancel")
        yield from job_check_ids(asked)
        return (yield from job_cancel(asked))

    @over_http(http_plans.job_retry)
    def retry(self, *job_ids: JobRef) -> GroupOp[RetryResult]:
        """Queue failed, dead or cancelled jobs again; the ids that moved, a list whose
        ``revived`` names the jobs brought back with them (see :class:`RetryResult`).

        An id no job has raises :class:`taskq.errors.JobNotFound`, as :meth:`cancel`
        does. A job that would be cancelled again at once, as it waits for a parent
        that ended without succeeding and is not retried with it, raises
        :class:`taskq.errors.WrongState` naming that parent; then no job moves.
        """
        asked = specs.job_ids(job_ids, "retry")
        yield from job_check_ids(asked)
        retried, revived = yield from job_retry_reviving(asked, refuse_recancelled=True)
        return RetryResult(retried, revived)

    @Operation
    def declared_spec(
        self, target: str, args: Sequence[Any] = (), options: Mapping[str, Any] | None = None
    ) -> GroupOp[JobSpec]:
        """The job a submit of ``target`` ("pkg.mod:f") by name makes, not yet submitted.

        The version of its declaration that workers serve gives the options
        (:mod:`taskq.broker.client.declarations`), ``options`` (those of
        :func:`taskq.call_spec`, the call's keyword arguments in ``kwargs``)
        win over them, and the arguments are checked against its parameters
        (:class:`taskq.errors.InvalidJob`). A name no worker has declared
        raises :class:`taskq.errors.UnknownFunction`.
        """
        return self.declarations.spec(
            target, args, {"submitter": self.submitter, **(options or {})}
        )

    @Operation
    def declared_specs(self, calls: Sequence[NamedCall]) -> GroupOp[builtins.list[JobSpec]]:
        """The jobs of many calls by name, each as :meth:`declared_spec` makes it, in order;
        the first refused raises, its message headed by its ``where`` (``job 3: ...``)."""
        return self._named_specs_plan(calls)

    # -- workflows ------------------------------------------------------------------

    @over_http(http_plans.workflow_get)
    def workflow(self, workflow_id: int) -> GroupOp[WorkflowInfo]:
        """The workflow and its jobs' counts per state; :class:`taskq.errors.WorkflowNotFound`."""
        return workflow_get(specs.workflow_id(workflow_id))

    @over_http(http_plans.workflow_list)
    def workflows(
        self,
        *,
        name: str | None = None,
        submitter: str | None = None,
        status: WorkflowStatus | str | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> GroupOp[builtins.list[WorkflowInfo]]:
        """Workflows newest first, each with its jobs' counts per state and its status;
        pass the last id seen as ``before`` for the next page of ``limit`` (1 to 1000).
        ``name``, ``submitter`` and ``status`` (a :class:`taskq.WorkflowStatus` or its
        name, ``status="running"``) keep the workflows of that name, of that submitter
        and in that status."""
        return workflow_list(
            name=name, submitter=submitter, status=status, before=before, limit=limit
        )

    @over_http(http_plans.workflow_wait)
    def wait_workflow(
        self, workflow_id: int, *, timeout: float | None = None
    ) -> GroupOp[WorkflowInfo]:
        """Wait until every job of the workflow has ended, whatever their outcomes.

        Jobs spawned by its running jobs count too: they join it in the write
        that ends their parent. :class:`taskq.errors.ResultTimeout` after ``timeout``.
        Its queued jobs are noted as :meth:`wait` notes a job.
        """
        timeout = checked_timeout(timeout)
        return _workflow_wait(specs.workflow_id(workflow_id), timeout, notes=self.wait_notes)

    @over_http(http_plans.workflow_jobs)
    def workflow_jobs(self, workflow_id: int) -> GroupOp[builtins.list[JobBrief]]:
        """The workflow's jobs, oldest first, each its id and state: one read however many,
        where :meth:`list` pages whole records; :class:`taskq.errors.WorkflowNotFound`."""
        return workflow_jobs(specs.workflow_id(workflow_id))

    @over_http(http_plans.workflow_edges)
    def workflow_edges(self, workflow_id: int) -> GroupOp[builtins.list[JobEdge]]:
        """Every dependency among the workflow's jobs, as (parent, child) edges, and which job
        spawned which (``spawned``)."""
        return workflow_edges(specs.workflow_id(workflow_id))

    @over_http(http_plans.workflow_cancel)
    def cancel_workflow(self, workflow_id: int) -> GroupOp[int]:
        """Cancel every unfinished job of the workflow (running ones at their next heartbeat)."""
        return workflow_cancel(specs.workflow_id(workflow_id))

    @over_http(http_plans.workflow_retry)
    def retry_workflow(self, workflow_id: int) -> GroupOp[int]:
        """Queue the workflow's failed, dead or cancelled jobs again (their waiting children
        with them); how many moved."""
        return workflow_retry(specs.workflow_id(workflow_id))

    @over_http(http_plans.job_relatives)
    def relatives(self, job_id: JobRef, *, limit: int = 100) -> GroupOp[Relatives]:
        """The job's parents (in declared order) and children, each with its state; the job
        that spawned it and those it spawned; at most ``limit`` (1 to 10,000) on each side.

        An id no job has raises :class:`taskq.errors.JobNotFound`.
        """
        asked = specs.job_id(job_id, "relatives")
        found = yield from job_relatives(asked, limit=limit)
        if found == Relatives(parents=(), children=()):
            # A job alone and no job read the same: tell them apart as GET /jobs/{id} does.
            yield from job_check_ids((asked,))
        return found


def _workflow_wait(
    workflow_id: int, timeout: float | None, poll_seconds: float = 0.1, *, notes: bool = False
) -> Op[WorkflowInfo]:
    """Read the workflow until none of its jobs is left to end, as ``job_wait`` reads a job,
    noting as it does (``notes``) the first of its queued jobs."""
    deadline = None if timeout is None else time.monotonic() + timeout
    note_at = note_time(timeout) if notes else None
    delay = min(poll_seconds, 0.02)
    while True:
        info = yield from workflow_get(workflow_id)
        if info.status is not WorkflowStatus.RUNNING:
            return info
        left = sum(count for state, count in info.counts.items() if not state.finished)
        if note_at is not None and time.monotonic() >= note_at:
            note_at = None
            if info.counts.get(JobState.QUEUED):
                first_queued = yield from job_list(
                    workflow_id=workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT
                )
                yield from note_queued(first_queued, f" of workflow {workflow_id}")
        if deadline is not None and time.monotonic() >= deadline:
            queued: builtins.list[Job] = []
            if info.counts.get(JobState.QUEUED):
                queued = yield from job_list(
                    workflow_id=workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT
                )
            workers = (yield from worker_list()) if queued else None
            raise workflow_wait_ran_out(workflow_id, left, timeout or 0.0, queued, workers)
        yield Pause(delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0)))
        # Start fast (most workflows of a test are short), then settle at poll_seconds.
        delay = min(delay * 2, poll_seconds)
