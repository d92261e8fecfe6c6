"""What the handles of both clients share: a finished job's result, a submitted flow's ids.

The handles themselves are each with its client: ``JobHandle`` and
``WorkflowHandle`` in :mod:`.blocking_client`, ``AsyncJobHandle`` and
``AsyncWorkflowHandle`` in :mod:`.async_client`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from taskq import errors
from taskq.broker.client import celery_habits
from taskq.broker.client.flows import Flow
from taskq.broker.ops import attempt_notes
from taskq.broker.records import Job, JobBrief, JobEdge, JobState, SubmittedWorkflow


def finished_result(job: Job) -> Any:
    """A finished job's result, or :class:`taskq.errors.JobFailed` with its error."""
    if job.state is JobState.SUCCEEDED:
        return job.result
    if job.state is JobState.CANCELLED:
        # When the cancel came and why, as its record tells (by request, or a parent's end).
        raise errors.JobFailed(
            f"job {job.id} ended cancelled {attempt_notes.cancelled(job)}", job=job
        )
    error = job.error or {}
    detail = f"{error.get('type', 'Error')}: {error.get('message', '')}".strip(": ")
    raise errors.JobFailed(
        f"job {job.id} ended {job.state.value} after {job.attempts} attempt(s)"
        + (f": {detail}" if detail else ""),
        job=job,
    )


class SubmittedFlow:
    """A submitted flow's ids, and where each of its steps went: what both faces' handles share.

    ``flow``: the flow as submitted; None for a handle read back from the store
    by the workflow's id (:func:`stored_flow`), which knows its ends (``end_ids``)
    but not which step of a flow became which job.
    """

    def __init__(
        self, submitted: SubmittedWorkflow, flow: Flow | None, end_ids: Sequence[int] = ()
    ) -> None:
        self.id = submitted.id
        self.job_ids = submitted.job_ids
        """Every job of the flow as submitted, parents before children."""
        self._flow = flow
        self._stored_end_ids = tuple(end_ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, jobs={len(self.job_ids)})"

    def _ids(self, part: Flow | None) -> list[int]:
        if part is None:
            return list(self.job_ids)
        if self._flow is None:
            raise errors.InvalidJob(
                f"this handle of workflow {self.id} was read back by its id, without the "
                "flow it was submitted from: jobs() takes no part here, and gives every job",
                field="part",
            )
        return [self.job_ids[position] for position in self._flow._positions(part)]

    if not TYPE_CHECKING:  # a type checker still flags every name a handle lacks

        def __getattr__(self, name: str) -> Any:
            raise celery_habits.missing(self, name, celery_habits.WORKFLOW_HANDLE, "pipeline")

        def __await__(self) -> Any:
            raise celery_habits.not_awaited(self)

    def _end_ids(self) -> list[int]:
        if self._flow is None:
            return list(self._stored_end_ids)
        return [self.job_ids[position] for position in self._flow._end_positions()]


def stored_flow(
    workflow_id: int, jobs: Sequence[JobBrief], edges: Sequence[JobEdge]
) -> tuple[SubmittedWorkflow, tuple[int, ...]]:
    """A workflow as the store has it, for a handle read back by its id: the jobs its own
    submit wrote (``JobBrief.submitted``; oldest first, so parents before children) and
    its last steps, those no other of them runs after.

    Jobs spawned by its jobs, or joined later with ``after=``, are neither: the handle
    that submit returned knows only the flow's own.
    """
    submitted = tuple(job.id for job in jobs if job.submitted)
    own = set(submitted)
    followed = {edge.parent_id for edge in edges if not edge.spawned and edge.child_id in own}
    ends = tuple(job_id for job_id in submitted if job_id not in followed)
    return SubmittedWorkflow(id=workflow_id, job_ids=submitted), ends


def remaining_seconds(deadline: float | None) -> float | None:
    """The time left until ``deadline`` (a ``time.monotonic()``), none below 0; None: no end."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def deadline_after(timeout: float | None) -> float | None:
    """The ``time.monotonic()`` at which ``timeout`` seconds from now end; None: no end."""
    if timeout is None:
        return None
    checked_timeout(timeout)
    return time.monotonic() + timeout


def checked_timeout(timeout: float | None) -> float | None:
    """``timeout`` as a wait takes it, or :class:`taskq.errors.InvalidJob` before any wait:
    not a number (``"30s"``) would fail deep in the wait, and a negative one would time
    out at once saying it waited "-1 s"."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise errors.InvalidJob(
            f"timeout is the seconds to wait, a number from 0 (None: no end), got {timeout!r}",
            field="timeout",
        )
    return timeout


def end_results(jobs: list[Job]) -> Any:
    """The last step's result; a list of them when the flow ends in several steps."""
    results = [finished_result(job) for job in jobs]
    return results[0] if len(results) == 1 else results
