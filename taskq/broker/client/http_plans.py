"""How each request of a client maps to the HTTP API of ``taskq serve``.

Each function takes the very parameters of the request it maps (declared in
:mod:`.job_operations`, :mod:`.fleet_operations`, :mod:`.schedule_operations`
with ``over_http(...)``, which holds the two signatures equal) and returns
its plan: the HTTP requests it makes, run by :class:`.http_transport.HttpTransport`.
The answers are the records a client on the store returns.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import msgspec

from taskq import errors
from taskq.broker.client.http_transport import (
    LONG_POLL_SECONDS,
    HttpPlan,
    HttpRequest,
    decoded,
)
from taskq.broker.client.job_query import JobQuery
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.problem_types import ScheduleNotFound, WrongState
from taskq.broker.ops.jobs import CancelResult
from taskq.broker.ops.schedules import Schedule
from taskq.broker.records import (
    Execution,
    Job,
    JobEdge,
    JobState,
    QueueStats,
    WorkerInfo,
    WorkflowInfo,
)


def _members(into: type[Any], response: Any, member: str) -> Any:
    """One member of an answer's JSON object, as ``into``."""
    return msgspec.convert(decoded(response, dict[str, Any])[member], into)


JobBody = JobRequest | dict[str, Any]
"""A job's body: built whole (:meth:`JobRequest.of_spec`), or a call by name with only the
options given (the server takes the declared ones for the rest)."""


# -- jobs -----------------------------------------------------------------------------


def _json(body: Any) -> bytes:
    """A body as JSON, or :class:`taskq.errors.InvalidJob` for arguments JSON cannot carry."""
    try:
        return msgspec.json.encode(body)
    except TypeError as exc:
        raise errors.InvalidJob(f"the arguments must be JSON: {exc}", field="args") from None


def submit_job(job: JobBody) -> HttpPlan[int]:
    """POST /jobs of one job; its id."""
    answer = yield HttpRequest("POST", "/jobs", body=_json(job))
    return int(decoded(answer, dict[str, Any])["id"])


def submit_jobs(jobs: Sequence[JobBody]) -> HttpPlan[builtins.list[int]]:
    """POST /jobs of a batch (an array), written all or none; their ids, in order."""
    answer = yield HttpRequest("POST", "/jobs", body=_json(list(jobs)))
    return [int(job_id) for job_id in decoded(answer, dict[str, Any])["ids"]]


def job_get(job_id: int) -> HttpPlan[Job]:
    answer = yield HttpRequest("GET", f"/jobs/{job_id}")
    return decoded(answer, Job)


def job_wait(job_id: int, *, timeout: float | None = None) -> HttpPlan[Job]:
    """Long polls of GET /jobs/{id}?wait=, each held by the server until the job ends or a
    minute passes, until it has ended; :class:`taskq.errors.ResultTimeout` after ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = LONG_POLL_SECONDS if deadline is None else max(deadline - time.monotonic(), 0.0)
        wait = min(left, LONG_POLL_SECONDS)
        answer = yield HttpRequest("GET", f"/jobs/{job_id}", {"wait": round(wait, 3)}, wait=wait)
        job = decoded(answer, Job)
        if job.state.finished:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.ResultTimeout(
                f"job {job_id} is still {job.state.value} after {timeout:g} s"
            )


def job_list(query: JobQuery | None = None) -> HttpPlan[builtins.list[Job]]:
    """GET /jobs, its filters those of the query (a :class:`JobQuery`)."""
    params: dict[str, str | int] = {"limit": 50}
    if query is not None:
        names = {"worker_id": "worker", "workflow_id": "workflow"}
        for name, value in msgspec.structs.asdict(query).items():
            if value is not None:
                params[names.get(name, name)] = (
                    value.value if isinstance(value, JobState) else value
                )
    answer = yield HttpRequest("GET", "/jobs", params)
    return list(_members(builtins.list[Job], answer, "jobs"))


def execution_list(job_id: int) -> HttpPlan[builtins.list[Execution]]:
    answer = yield HttpRequest("GET", f"/jobs/{job_id}/executions")
    return list(_members(builtins.list[Execution], answer, "executions"))


def worker_executions(
    worker_id: str, *, before: int | None = None, limit: int = 50
) -> HttpPlan[builtins.list[Execution]]:
    params: dict[str, str | int] = {"limit": limit}
    if before is not None:
        params["before"] = before
    answer = yield HttpRequest("GET", f"/workers/{quote(worker_id, safe='')}/executions", params)
    return list(_members(builtins.list[Execution], answer, "executions"))


def job_cancel(*job_ids: int) -> HttpPlan[CancelResult]:
    """DELETE /jobs/{id}, job by job: those it ended, and those running it asked to stop."""
    cancelled: builtins.list[int] = []
    requested: builtins.list[int] = []
    for job_id in job_ids:
        try:
            job = decoded((yield HttpRequest("DELETE", f"/jobs/{job_id}")), Job)
        except WrongState:
            continue  # ended already: neither, as on the store
        (cancelled if job.state is JobState.CANCELLED else requested).append(job_id)
    return CancelResult(tuple(cancelled), tuple(requested))


def job_retry(*job_ids: int) -> HttpPlan[builtins.list[int]]:
    """POST /jobs/{id}/retry, job by job: the ids that moved."""
    moved: builtins.list[int] = []
    for job_id in job_ids:
        try:
            job = decoded((yield HttpRequest("POST", f"/jobs/{job_id}/retry")), Job)
        except WrongState:
            continue
        if not job.state.finished:
            moved.append(job_id)
    return moved


# -- queues and workers ------------------------------------------------------------------


def _queue_patch(queue: str, change: dict[str, Any]) -> HttpPlan[None]:
    body = msgspec.json.encode(change)
    yield HttpRequest("PATCH", f"/queues/{quote(queue, safe='')}", body=body)


def queue_pause(queue: str, *, create: bool = False) -> HttpPlan[None]:
    return _queue_patch(queue, {"paused": True, "create": create})


def queue_resume(queue: str, *, create: bool = False) -> HttpPlan[None]:
    return _queue_patch(queue, {"paused": False, "create": create})


def queue_stats() -> HttpPlan[builtins.list[QueueStats]]:
    answer = yield HttpRequest("GET", "/queues")
    return list(_members(builtins.list[QueueStats], answer, "queues"))


def worker_list() -> HttpPlan[builtins.list[WorkerInfo]]:
    answer = yield HttpRequest("GET", "/workers")
    return list(_members(builtins.list[WorkerInfo], answer, "workers"))


# -- schedules -----------------------------------------------------------------------------


def schedule_list() -> HttpPlan[builtins.list[Schedule]]:
    answer = yield HttpRequest("GET", "/schedules")
    return list(_members(builtins.list[Schedule], answer, "schedules"))


def schedule_remove(name: str) -> HttpPlan[bool]:
    """DELETE /schedules/{name}: whether there was one."""
    try:
        yield HttpRequest("DELETE", f"/schedules/{quote(name, safe='')}")
    except ScheduleNotFound:
        return False
    return True


# -- workflows -------------------------------------------------------------------------------


def _workflow_view(workflow_id: int) -> HttpPlan[dict[str, Any]]:
    answer = yield HttpRequest("GET", f"/workflows/{workflow_id}")
    return decoded(answer, dict[str, Any])


def workflow_get(workflow_id: int) -> HttpPlan[WorkflowInfo]:
    view = yield from _workflow_view(workflow_id)
    return msgspec.convert(view["workflow"], WorkflowInfo)


def workflow_edges(workflow_id: int) -> HttpPlan[builtins.list[JobEdge]]:
    view = yield from _workflow_view(workflow_id)
    return msgspec.convert(view["edges"], builtins.list[JobEdge])


def _workflow_moved(method: str, path: str) -> HttpPlan[int]:
    try:
        answer = yield HttpRequest(method, path)
    except WrongState:
        return 0
    return int(decoded(answer, dict[str, Any])["moved"])


def workflow_cancel(workflow_id: int) -> HttpPlan[int]:
    return _workflow_moved("DELETE", f"/workflows/{workflow_id}")


def workflow_retry(workflow_id: int) -> HttpPlan[int]:
    return _workflow_moved("POST", f"/workflows/{workflow_id}/retry")
