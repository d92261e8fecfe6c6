"""What a submit returns: a job's handle, or a workflow's, of the client's kind (blocking or async).

A handle holds ids and the client; every question it answers is a request
of that client (:mod:`taskq.broker.client.operations`), so the two kinds
differ only in how they wait.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from taskq import errors
from taskq.broker.client.flows import Flow
from taskq.broker.ops.jobs import CancelResult
from taskq.broker.records import Job, JobState, SubmittedWorkflow, WorkflowInfo

if TYPE_CHECKING:
    from taskq.broker.client.client import AsyncClient, Client


def finished_result(job: Job) -> Any:
    """A finished job's result, or :class:`taskq.errors.JobFailed` with its error."""
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
        return finished_result(self.client.wait(self.id, timeout=timeout))

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
        return finished_result(await self.client.wait(self.id, timeout=timeout))

    async def cancel(self) -> CancelResult:
        """Cancel the job (at once when queued, at the next heartbeat when running)."""
        return await self.client.cancel(self.id)


class _Submitted:
    """A submitted flow's ids, and where each of its steps went."""

    def __init__(self, submitted: SubmittedWorkflow, flow: Flow) -> None:
        self.id = submitted.id
        self.job_ids = submitted.job_ids
        """Every job of the flow as submitted, parents before children."""
        self._flow = flow

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, jobs={len(self.job_ids)})"

    def _ids(self, part: Flow | None) -> list[int]:
        if part is None:
            return list(self.job_ids)
        return [self.job_ids[position] for position in self._flow._positions(part)]

    def _end_ids(self) -> list[int]:
        return [self.job_ids[position] for position in self._flow._end_positions()]


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _results(jobs: list[Job]) -> Any:
    """The last step's result; a list of them when the flow ends in several steps."""
    results = [finished_result(job) for job in jobs]
    return results[0] if len(results) == 1 else results


class WorkflowHandle(_Submitted):
    """A submitted workflow: its id, its jobs, and shortcuts to wait for it and steer it."""

    def __init__(self, client: Client, submitted: SubmittedWorkflow, flow: Flow) -> None:
        super().__init__(submitted, flow)
        self.client = client

    def jobs(self, part: Flow | None = None) -> list[JobHandle]:
        """The handles of ``part``'s steps (a flow this one was built from), else of every job."""
        return [JobHandle(self.client, job_id) for job_id in self._ids(part)]

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the flow's last step; its result (a list, when it ends in several).

        :class:`taskq.errors.JobFailed` when one of them did not succeed.
        Jobs the flow's steps spawn while running may still run: :meth:`wait`
        waits for those too.
        """
        deadline = _deadline(timeout)
        ends = [
            self.client.wait(job_id, timeout=_remaining(deadline)) for job_id in self._end_ids()
        ]
        return _results(ends)

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


class AsyncWorkflowHandle(_Submitted):
    """A submitted workflow, for async code (see :class:`WorkflowHandle`)."""

    def __init__(self, client: AsyncClient, submitted: SubmittedWorkflow, flow: Flow) -> None:
        super().__init__(submitted, flow)
        self.client = client

    def jobs(self, part: Flow | None = None) -> list[AsyncJobHandle]:
        """The handles of ``part``'s steps (a flow this one was built from), else of every job."""
        return [AsyncJobHandle(self.client, job_id) for job_id in self._ids(part)]

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the flow's last step; its result (see :meth:`WorkflowHandle.result`)."""
        deadline = _deadline(timeout)
        ends = [
            await self.client.wait(job_id, timeout=_remaining(deadline))
            for job_id in self._end_ids()
        ]
        return _results(ends)

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
