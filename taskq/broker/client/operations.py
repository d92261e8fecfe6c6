"""Every request of a client but submit, declared once: its signature, its docstring, its plan.

Each method of :class:`Operations` is decorated with :class:`Operation` and
returns the plan of its request (or with :class:`Paged`, and returns its
pages). Read from a :class:`Blocking` client (
:class:`taskq.broker.client.client.Client`) it is a method that runs the plan
and returns its answer; from an :class:`Awaiting` one
(:class:`taskq.broker.client.client.AsyncClient`) a coroutine method that
awaits it (see :mod:`taskq.broker.client.faces`). So the two clients ask the
same, with the same parameters, by construction; they differ only in how
they wait.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import msgspec

from taskq import errors
from taskq.broker import schedule_timing
from taskq.broker.client.client_base import ClientBase
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.faces import Operation, Paged
from taskq.broker.client.group_commit import GroupOp
from taskq.broker.ops.functions import DeclaredFunction, function_list, queue_served_list
from taskq.broker.ops.jobs import (
    CancelResult,
    ExecutionStats,
    ThroughputBucket,
    execution_list,
    execution_stats,
    execution_throughput,
    job_cancel,
    job_get,
    job_list,
    job_retry,
    job_wait,
)
from taskq.broker.ops.maintenance import Pruner
from taskq.broker.ops.migrations import schema_version
from taskq.broker.ops.output import OutputReader
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import (
    KEEP,
    Keep,
    SubmitLimit,
    job_counts,
    queue_set_defaults,
    queue_set_limits,
    queue_set_paused,
    submit_limit_list,
    submit_limit_remove,
    submit_limit_set,
)
from taskq.broker.ops.schedules import (
    Schedule,
    ScheduleAdded,
    schedule_add,
    schedule_list,
    schedule_remove,
    schedule_set_paused,
)
from taskq.broker.ops.workers import worker_list
from taskq.broker.ops.workflows import (
    job_relatives,
    workflow_cancel,
    workflow_edges,
    workflow_get,
    workflow_retry,
)
from taskq.broker.records import (
    Execution,
    Job,
    JobEdge,
    JobSpec,
    JobState,
    QueueStats,
    Relatives,
    WorkerInfo,
    WorkflowInfo,
)
from taskq.broker.stores.trampoline import Pause
from taskq.retry import RetryPolicy

T = TypeVar("T")
P = ParamSpec("P")


class JobQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which jobs :meth:`Operations.list` returns: every filter given, newest first.

    ``state`` is a :class:`taskq.JobState` or its name (``state="succeeded"``);
    ``text`` matches a queue name exactly or any part of the payload. Pass
    the last id seen as ``before`` for the next page of ``limit`` (1 to 1000).
    """

    state: JobState | str | None = None
    queue: str | None = None
    worker_id: str | None = None
    submitter: str | None = None
    text: str | None = None
    workflow_id: int | None = None
    before: int | None = None
    limit: int = 50


class Operations(ClientBase):
    """The requests both clients make, each as the plan of its answer."""

    # -- jobs ---------------------------------------------------------------------

    @Operation
    def get(self, job_id: int) -> GroupOp[Job]:
        """The job, or :class:`taskq.errors.JobNotFound`."""
        job = yield from job_get(job_id)
        if job is None:
            raise errors.JobNotFound(f"no job with id {job_id}")
        return job

    @Operation
    def wait(self, job_id: int, *, timeout: float | None = None) -> GroupOp[Job]:
        """Wait until the job finishes, whatever its outcome."""
        return job_wait(job_id, timeout=timeout)

    @Operation
    def list(self, query: JobQuery | None = None) -> GroupOp[builtins.list[Job]]:
        """Jobs newest first, as ``query`` (a :class:`JobQuery`) selects them; None: any 50."""
        # JobQuery's fields are job_list's keywords (tests/unit/test_client_faces.py).
        return job_list(**msgspec.structs.asdict(query or JobQuery()))

    @Operation
    def executions(self, job_id: int) -> GroupOp[builtins.list[Execution]]:
        """Every attempt at a job, oldest first."""
        return execution_list(job_id=job_id)

    @Paged
    def output(
        self,
        job_id: int,
        *,
        attempt: int | None = None,
        start: int = 0,
        follow: bool = False,
        poll_seconds: float = 0.25,
    ) -> OutputReader:
        """The job's output (stdout, stderr and logging), piece by piece as it is stored.

        Yields :class:`taskq.OutputText` pieces, an :class:`taskq.OutputDropped`
        where output was not kept (the oldest past the attempt's cap), and an
        :class:`taskq.AttemptEnded` once an attempt is over and all its output
        was read. ``attempt``: the number of the attempt to begin with (the
        latest by default); ``start``: the byte of its output to begin at (to
        resume, a piece's ``attempt`` and ``end``). Not following, it yields
        what that attempt has stored now; following, it waits for more
        (polling every ``poll_seconds`` at most) and goes on to each later
        attempt as it starts, until the job ends.
        """
        return OutputReader(
            job_id, attempt=attempt, start=start, follow=follow, poll_seconds=poll_seconds
        )

    @Operation
    def worker_executions(
        self, worker_id: str, *, before: int | None = None, limit: int = 50
    ) -> GroupOp[builtins.list[Execution]]:
        """A worker's attempts, newest first; pass the last id seen as ``before`` for more."""
        return execution_list(worker_id=worker_id, before=before, limit=limit)

    @Operation
    def cancel(self, *job_ids: int) -> GroupOp[CancelResult]:
        """Cancel jobs: queued ones at once, running ones at their next heartbeat."""
        return job_cancel(job_ids)

    @Operation
    def retry(self, *job_ids: int) -> GroupOp[builtins.list[int]]:
        """Queue failed, dead or cancelled jobs again; the ids that moved."""
        return job_retry(job_ids)

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
        return self.declarations.spec_many(
            [
                dataclasses.replace(call, options={"submitter": self.submitter, **call.options})
                for call in calls
            ]
        )

    # -- workflows ------------------------------------------------------------------

    @Operation
    def workflow(self, workflow_id: int) -> GroupOp[WorkflowInfo]:
        """The workflow and its jobs' counts per state; :class:`taskq.errors.WorkflowNotFound`."""
        return workflow_get(workflow_id)

    @Operation
    def wait_workflow(
        self, workflow_id: int, *, timeout: float | None = None
    ) -> GroupOp[WorkflowInfo]:
        """Wait until every job of the workflow has ended, whatever their outcomes.

        Jobs spawned by its running jobs count too: they join it in the write
        that ends their parent. :class:`taskq.errors.ResultTimeout` after ``timeout``.
        """
        return _workflow_wait(workflow_id, timeout)

    @Operation
    def workflow_edges(self, workflow_id: int) -> GroupOp[builtins.list[JobEdge]]:
        """Every dependency among the workflow's jobs: (parent, child) pairs."""
        return workflow_edges(workflow_id)

    @Operation
    def cancel_workflow(self, workflow_id: int) -> GroupOp[int]:
        """Cancel every unfinished job of the workflow (running ones at their next heartbeat)."""
        return workflow_cancel(workflow_id)

    @Operation
    def retry_workflow(self, workflow_id: int) -> GroupOp[int]:
        """Queue the workflow's failed, dead or cancelled jobs again (their waiting children
        with them); how many moved."""
        return workflow_retry(workflow_id)

    @Operation
    def relatives(self, job_id: int, *, limit: int = 100) -> GroupOp[Relatives]:
        """The job's parents (in declared order) and children, each with its state."""
        return job_relatives(job_id, limit=limit)

    # -- queues and limits ----------------------------------------------------------

    @Operation
    def stats(self) -> GroupOp[builtins.list[QueueStats]]:
        """Every queue: its counts per state, whether it is paused, its limits."""
        return job_counts()

    @Operation
    def pause(self, queue: str, *, create: bool = False) -> GroupOp[None]:
        """Stop workers from claiming the queue's jobs.

        A queue without jobs or settings is refused (a misspelt name would
        become a new paused queue) unless ``create``: to pause it ahead of its
        first job.
        """
        return queue_set_paused(queue, True, create=create)

    @Operation
    def resume(self, queue: str, *, create: bool = False) -> GroupOp[None]:
        """Let workers claim the queue's jobs again (unknown queues as for :meth:`pause`)."""
        return queue_set_paused(queue, False, create=create)

    @Operation
    def set_queue_limits(
        self,
        queue: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate_limit: float | Keep | None = KEEP,
        rate_period: float = 1.0,
    ) -> GroupOp[None]:
        """Cap a queue cluster-wide: ``max_running`` at once, ``rate_limit`` starts a period.

        ``None`` lifts a limit; one not given stays as it is.
        """
        return queue_set_limits(
            queue, max_running=max_running, rate_limit=rate_limit, rate_period=rate_period
        )

    @Operation
    def set_queue_defaults(
        self,
        queue: str,
        *,
        timeout: float | Keep | None = KEEP,
        max_attempts: int | Keep | None = KEEP,
        limits: dict[str, Any] | Keep | None = KEEP,
        retry: RetryPolicy | dict[str, Any] | Keep | None = KEEP,
    ) -> GroupOp[None]:
        """Set what the queue's jobs get when they say none: applied by every enqueue.

        ``None`` lifts a default; one not given stays. ``limits`` merge name by
        name (a limit given as None is lifted). Read them back in
        :meth:`stats` (``job_defaults``).
        """
        return queue_set_defaults(
            queue, timeout=timeout, max_attempts=max_attempts, limits=limits, retry=retry
        )

    @Operation
    def set_submit_limit(self, submitter: str, rate: float, period: float) -> GroupOp[None]:
        """Let ``submitter`` ("*": all without a limit of their own) submit ``rate`` a period."""
        return submit_limit_set(submitter, rate, period)

    @Operation
    def remove_submit_limit(self, submitter: str) -> GroupOp[None]:
        """Lift a submitter's own limit (the "*" limit, if any, applies again)."""
        return submit_limit_remove(submitter)

    @Operation
    def submit_limits(self) -> GroupOp[builtins.list[SubmitLimit]]:
        """Every submitter's limit, "*" (everyone else) included."""
        return submit_limit_list()

    # -- the fleet and the store ------------------------------------------------------

    @Operation
    def workers(self) -> GroupOp[builtins.list[WorkerInfo]]:
        """Every registered worker, stopped ones included."""
        return worker_list()

    @Operation
    def functions(self) -> GroupOp[builtins.list[DeclaredFunction]]:
        """Every job workers have declared, by name: the version submits use, its live workers."""
        return function_list()

    @Operation
    def served_queues(self) -> GroupOp[set[str]]:
        """The queues at least one live worker takes jobs from."""
        return queue_served_list()

    @Operation
    def schema_version(self) -> GroupOp[int]:
        """The newest schema migration the store has (any node's copy; 0: none)."""
        return schema_version()

    @Operation
    def throughput(
        self, *, minutes: int = 15, now: float | None = None
    ) -> GroupOp[builtins.list[ThroughputBucket]]:
        """Finished attempts per minute, oldest first, back from ``now`` (the store's clock)."""
        return execution_throughput(minutes=minutes, now=now)

    @Operation
    def execution_stats(self) -> GroupOp[ExecutionStats]:
        """The store's totals: attempts' run time by outcome, jobs' pickup latency."""
        return execution_stats()

    @Operation
    def prune(self, *, older_than: float) -> GroupOp[int]:
        """Delete jobs finished more than ``older_than`` seconds ago; how many went."""
        pruner = Pruner(retention_seconds=older_than)  # checked now, before any request
        return _prune_batches(pruner)

    # -- schedules --------------------------------------------------------------------

    @Operation
    def add_schedule(
        self,
        name: str,
        job: JobSpec | NamedCall,
        *,
        cron: str | None = None,
        every_seconds: float | None = None,
        timezone: str = "UTC",
        catch_up: schedule_timing.CatchUp = schedule_timing.CatchUp.ONCE,
        replace: bool = False,
        unchecked: bool = False,
    ) -> GroupOp[ScheduleAdded]:
        """Submit ``job`` on every tick of ``cron`` (read in ``timezone``) or ``every_seconds``.

        A call by name (:class:`NamedCall`) is resolved now, as
        :meth:`declared_spec` does: every tick enqueues today's declared
        options. A built job is kept, its call checked. An undeclared name
        raises :class:`taskq.errors.UnknownFunction` unless ``unchecked``.
        A taken name is an error unless ``replace``, or unless the schedule
        stands exactly as given (a set-up script may run twice).
        """

        def plan() -> Op[ScheduleAdded]:
            spec = yield from self.declarations.job_of(job, unchecked, self.submitter)
            added = yield from schedule_add(
                name,
                spec,
                cron=cron,
                every_seconds=every_seconds,
                timezone=timezone,
                catch_up=catch_up,
                replace=replace,
            )
            return added

        return plan()

    @Operation
    def schedules(self) -> GroupOp[builtins.list[Schedule]]:
        """Every schedule, by name, with its next fire time."""
        return schedule_list()

    @Operation
    def remove_schedule(self, name: str) -> GroupOp[bool]:
        """Delete a schedule; False when there is none of that name."""
        return schedule_remove(name)

    @Operation
    def pause_schedule(self, name: str) -> GroupOp[bool]:
        """Fire none of the schedule's ticks until resumed; False when there is none."""
        return schedule_set_paused(name, True)

    @Operation
    def resume_schedule(self, name: str) -> GroupOp[bool]:
        """Fire the schedule's ticks again; False when there is none of that name."""
        return schedule_set_paused(name, False)


_UNFINISHED = (JobState.WAITING, JobState.QUEUED, JobState.RUNNING)


def _workflow_wait(
    workflow_id: int, timeout: float | None, poll_seconds: float = 0.1
) -> Op[WorkflowInfo]:
    """Read the workflow until none of its jobs is left to end, as ``job_wait`` reads a job."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = min(poll_seconds, 0.02)
    while True:
        info = yield from workflow_get(workflow_id)
        left = sum(info.counts.get(state, 0) for state in _UNFINISHED)
        if not left:
            return info
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.ResultTimeout(
                f"workflow {workflow_id} still has {left} job(s) to end after {timeout:g} s"
            )
        yield Pause(delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0)))
        # Start fast (most workflows of a test are short), then settle at poll_seconds.
        delay = min(delay * 2, poll_seconds)


def _prune_batches(pruner: Pruner) -> Op[int]:
    """Batch after batch, so that no one request deletes an unbounded number of rows."""
    pruned = 0
    while True:
        batch = (yield from pruner.plan_once())["pruned"]
        pruned += batch
        if batch < pruner.batch:
            return pruned
