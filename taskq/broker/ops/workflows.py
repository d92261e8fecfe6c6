"""Workflows: jobs that run after other jobs, submitted whole, released by their parents' ends.

A job with parents is ``waiting`` until every parent has ended; the write
that ends its last parent also makes it ``queued`` (see the SQL of
``sql/queries/workflows.sql``): no scan, no maintenance tick, exactly once.
A parent that ends failed, dead or cancelled cancels its waiting children
at once, and theirs, unless a child runs anyway. Retrying that parent
revives them; cancelling a job cancels the jobs waiting on it.

The contract other layers code against; the bodies are being written.
"""

from __future__ import annotations

from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES
from taskq.broker.ops.plan import Op
from taskq.broker.records import (
    JobEdge,
    ParentResult,
    Relatives,
    SubmittedWorkflow,
    WorkflowInfo,
    WorkflowSubmission,
)


def workflow_submit(
    submission: WorkflowSubmission,
    *,
    now: float | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Op[SubmittedWorkflow]:
    """Write a whole workflow in one request: every job and every dependency, or nothing.

    Refused with :class:`taskq.errors.InvalidJob` (``field="after"``), nothing
    written: a cycle, a parent position out of range, a parent named twice,
    a stored parent that does not exist (never submitted, or pruned), or one
    outside the workflow extended. The same ``idempotency_key`` with the same
    request returns the same ids; with another, IdempotencyConflict.
    """
    raise NotImplementedError


def workflow_get(workflow_id: int) -> Op[WorkflowInfo]:
    """The workflow and its jobs' counts per state; :class:`taskq.errors.WorkflowNotFound`."""
    raise NotImplementedError


def workflow_edges(workflow_id: int) -> Op[list[JobEdge]]:
    """Every dependency among the workflow's jobs, by child then declared order."""
    raise NotImplementedError


def workflow_cancel(workflow_id: int, *, now: float | None = None) -> Op[int]:
    """Cancel every unfinished job of the workflow (running ones asked to stop); how many."""
    raise NotImplementedError


def workflow_retry(workflow_id: int, *, now: float | None = None) -> Op[int]:
    """Retry every failed, dead or cancelled job of the workflow; how many were moved."""
    raise NotImplementedError


def job_parent_results(
    job_id: int, *, after_position: int = -1, limit: int = 100
) -> Op[list[ParentResult]]:
    """One page of how the job's parents ended, in declared order, after ``after_position``."""
    raise NotImplementedError


def job_relatives(job_id: int, *, limit: int = 100) -> Op[Relatives]:
    """The job's parents (declared order) and children (by id), at most ``limit`` of each."""
    raise NotImplementedError
