"""How each request of a client maps to the HTTP API of ``taskq serve``.

Each function takes the very parameters of the request it maps (declared in
:mod:`.job_operations` and :mod:`.schedule_operations` with ``over_http(...)``,
which holds the two signatures equal) and returns its plan: the HTTP requests
it makes, run by :class:`.http_transport.HttpTransport`. The answers are the
records a client on the store returns. Those of the requests about queues,
workers, submitters and the store are in :mod:`.http_fleet_plans`.
"""

from __future__ import annotations

import builtins
import re
import time
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import msgspec

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client import http_fleet_plans, specs
from taskq.broker.client.declarations import NamedCall
from taskq.broker.client.http_requests import (
    LONG_POLL_SECONDS,
    HttpPlan,
    HttpRequest,
    decoded,
    decoded_member,
)
from taskq.broker.client.job_query import JobQuery, filters_in_a_query
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.retry_result import RetryResult
from taskq.broker.client.specs import JobRef
from taskq.broker.ops.job_waits import (
    QUEUED_LOOKED_AT,
    QUEUED_PARENTS_LOOKED_AT,
    note_time,
    wait_ran_out,
    workflow_wait_ran_out,
)
from taskq.broker.ops.jobs import CancelResult
from taskq.broker.ops.relatives import relatives_limit
from taskq.broker.ops.schedules import Schedule, ScheduleAdded
from taskq.broker.records import (
    Execution,
    Job,
    JobBrief,
    JobEdge,
    JobSpec,
    JobState,
    Relatives,
    SubmittedWorkflow,
    WorkflowInfo,
    WorkflowStatus,
)
from taskq.broker.schedule_timing import CatchUp
from taskq.broker.unserved import WAIT_NOTES, queued_notes, unserved_queue

T = TypeVar("T")

JobBody = JobRequest | dict[str, Any]
"""A job's body: built whole (:meth:`JobRequest.of_spec`), or a call by name with only the
options given (the server takes the declared ones for the rest)."""


def by_name_body(target: str, args: Sequence[Any], options: dict[str, Any]) -> dict[str, Any]:
    """A submit by name over HTTP: the call and only the options given, for the server to
    complete from the declaration; the submitter is the token's name, not an option."""
    if "submitter" in options:
        raise errors.InvalidJob(
            "over HTTP the submitter is the name of the client's token, not an option",
            field="submitter",
        )
    given = {name: value for name, value in options.items() if value is not None}
    return {"target": target, "args": list(args), **given}


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
    return int(decoded_member(answer, "id", int))


def submit_jobs(jobs: Sequence[JobBody]) -> HttpPlan[builtins.list[int]]:
    """POST /jobs of a batch (an array), written all or none; their ids, in order."""
    if not jobs:
        return []  # the server takes one job or more; the store writes none
    answer = yield HttpRequest("POST", "/jobs", body=_json(list(jobs)))
    return list(decoded_member(answer, "ids", builtins.list[int]))


def job_get(job_id: JobRef) -> HttpPlan[Job]:
    answer = yield HttpRequest("GET", f"/jobs/{specs.job_id(job_id, 'get')}")
    return decoded(answer, Job)


def job_wait(job_id: JobRef, *, timeout: float | None = None) -> HttpPlan[Job]:
    """Long polls of GET /jobs/{id}?wait=, each held by the server until the job ends or a
    minute passes, until it has ended; :class:`taskq.errors.ResultTimeout` after ``timeout``."""
    path = f"/jobs/{specs.job_id(job_id, 'wait')}"
    deadline = None if timeout is None else time.monotonic() + timeout
    note_at = note_time(timeout)  # as a store client's waits (``job_waits.job_wait``)
    while True:
        left = LONG_POLL_SECONDS if deadline is None else max(deadline - time.monotonic(), 0.0)
        wait = min(left, LONG_POLL_SECONDS, _until(note_at))
        answer = yield HttpRequest("GET", path, {"wait": round(wait, 3)}, wait=wait)
        job = decoded(answer, Job)
        if job.state.finished:
            return job
        if note_at is not None and time.monotonic() >= note_at:
            note_at = None
            yield from _note_queued([job])
        if deadline is not None and time.monotonic() >= deadline:
            waited_on = (yield from _queued_waited_on(job)) if job.state is JobState.WAITING else []
            queued = job.state is JobState.QUEUED
            named = queued or bool(waited_on)
            workers = (yield from _if_allowed(http_fleet_plans.worker_list())) if named else None
            queues = (yield from _if_allowed(http_fleet_plans.queue_stats())) if queued else None
            raise wait_ran_out(job, timeout or 0.0, workers, waited_on, queues)


def _until(moment: float | None) -> float:
    """Seconds from now to ``moment`` (monotonic; None: never), a long poll's bound."""
    return LONG_POLL_SECONDS if moment is None else max(moment - time.monotonic(), 0.0)


def _note_queued(jobs: Sequence[Job], whose: str = "") -> HttpPlan[None]:
    """``job_waits.note_queued`` over HTTP: the workers and queues read if this caller may."""
    queued = [job for job in jobs if job.state is JobState.QUEUED]
    if not queued:
        return
    workers = yield from _if_allowed(http_fleet_plans.worker_list())
    served = any(unserved_queue([job], workers) is None for job in queued)
    queues = (yield from _if_allowed(http_fleet_plans.queue_stats())) if served else None
    for line, why in queued_notes(queued, workers, queues, whose):
        WAIT_NOTES.warning(line, extra={"why": why})


def _queued_waited_on(job: Job) -> HttpPlan[builtins.list[Job]]:
    """``job_waits.queued_waited_on`` over HTTP: the same bounded reads."""
    if job.workflow_id is not None:
        query = JobQuery(workflow_id=job.workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT)
        return (yield from job_list(query))
    relatives = yield from job_relatives(job.id, limit=QUEUED_LOOKED_AT)
    queued = [parent for parent, state in relatives.parents if state is JobState.QUEUED]
    found = []
    for parent_id in queued[:QUEUED_PARENTS_LOOKED_AT]:
        found.append((yield from job_get(parent_id)))
    return found


def _if_allowed(plan: HttpPlan[T]) -> HttpPlan[T | None]:
    """What ``plan`` reads (the workers, the queues), for a wait's error to say why its job
    has not started; None when the server will not tell this caller."""
    try:
        return (yield from plan)
    except errors.TaskqError:
        return None


@filters_in_a_query
def job_list(query: JobQuery | None = None) -> HttpPlan[builtins.list[Job]]:
    """GET /jobs, its filters those of the query (a :class:`JobQuery`).

    An id no workflow has lists no jobs, as a client on the store lists none,
    though the server answers it 404: a caller that must tell the two apart
    asks for the workflow, as ``taskq jobs --workflow`` does.
    """
    params: dict[str, str | int] = {"limit": 50}
    if query is not None:
        # Refused here as on the store (the server's refusal would be a BadRequest
        # about a query parameter, which this caller did not write): the limit, the state.
        job_validation.check_page_limit(query.limit)
        if query.state is not None:
            query = msgspec.structs.replace(
                query, state=job_validation.parse_job_state(query.state)
            )
        names = {"worker_id": "worker", "workflow_id": "workflow"}
        for name, value in msgspec.structs.asdict(query).items():
            if value is not None:
                params[names.get(name, name)] = (
                    value.value if isinstance(value, JobState) else value
                )
    try:
        answer = yield HttpRequest("GET", "/jobs", params)
    except errors.WorkflowNotFound:
        return []
    return list(decoded_member(answer, "jobs", builtins.list[Job]))


def execution_list(job_id: JobRef) -> HttpPlan[builtins.list[Execution]]:
    answer = yield HttpRequest("GET", f"/jobs/{specs.job_id(job_id, 'executions')}/executions")
    return list(decoded_member(answer, "executions", builtins.list[Execution]))


def worker_executions(
    worker_id: str, *, before: int | None = None, limit: int = 50
) -> HttpPlan[builtins.list[Execution]]:
    params: dict[str, str | int] = {"limit": limit}
    if before is not None:
        params["before"] = before
    answer = yield HttpRequest("GET", f"/workers/{quote(worker_id, safe='')}/executions", params)
    return list(decoded_member(answer, "executions", builtins.list[Execution]))


def job_cancel(*job_ids: JobRef) -> HttpPlan[CancelResult]:
    """POST /jobs/cancel of every id at once (one id too), which the server hands to the
    store's cancel: the same answer as on the store, those it ended and those running it
    asked to stop, an ended job in neither.

    An id no job has raises :class:`taskq.errors.JobNotFound` naming it (the first, in the
    order given), and then no job moves. At most 1000 ids a call: more are refused
    (:class:`taskq.errors.InvalidJob` naming ``ids``), none moved.
    """
    asked = specs.job_ids(job_ids, "cancel")
    if not asked:
        return CancelResult((), ())  # the server takes one id or more; the store moves none
    answer = yield HttpRequest("POST", "/jobs/cancel", body=_ids_body(asked))
    return decoded(answer, CancelResult)


class _Retried(msgspec.Struct, frozen=True):
    """The answer of POST /jobs/retry; a server from before ``revived`` answers without it:
    none counted, as it then said."""

    retried: builtins.list[int]
    revived: builtins.list[int] = []


def job_retry(*job_ids: JobRef) -> HttpPlan[RetryResult]:
    """POST /jobs/retry of every id at once, as :func:`job_cancel`: the ids that moved,
    ascending (a job not failed, dead or cancelled stays as it is), and those brought
    back with them."""
    asked = specs.job_ids(job_ids, "retry")
    if not asked:
        return RetryResult()
    answer = yield HttpRequest("POST", "/jobs/retry", body=_ids_body(asked))
    body = decoded(answer, _Retried)
    return RetryResult(body.retried, body.revived)


def job_relatives(job_id: JobRef, *, limit: int = 100) -> HttpPlan[Relatives]:
    # The limit brought within bounds as the store's read brings it, not refused.
    params = {"limit": relatives_limit(limit)}
    path = f"/jobs/{specs.job_id(job_id, 'relatives')}/relatives"
    answer = yield HttpRequest("GET", path, params)
    return decoded(answer, Relatives)


def _ids_body(job_ids: Sequence[int]) -> bytes:
    return msgspec.json.encode({"ids": list(job_ids)})


# -- schedules -----------------------------------------------------------------------------


def schedule_list() -> HttpPlan[builtins.list[Schedule]]:
    answer = yield HttpRequest("GET", "/schedules")
    return list(decoded_member(answer, "schedules", builtins.list[Schedule]))


def schedule_add(
    name: str,
    job: JobSpec | NamedCall,
    *,
    cron: str | None = None,
    every_seconds: float | None = None,
    timezone: str = "UTC",
    catch_up: CatchUp = CatchUp.ONCE,
    replace: bool = False,
    unchecked: bool = False,
) -> HttpPlan[ScheduleAdded]:
    """POST /schedules: the server resolves a call by name now, and checks a built job's call
    against its declaration (its options kept), unless ``unchecked``."""
    body: JobBody
    if isinstance(job, NamedCall):
        body = {**by_name_body(job.target, job.args, dict(job.options)), "unchecked": unchecked}
    else:
        body = msgspec.structs.replace(JobRequest.of_spec(job), unchecked=unchecked)
    schedule = {
        "name": name,
        "job": body,
        "cron": cron,
        "every_seconds": every_seconds,
        "timezone": timezone,
        "catch_up": catch_up,
        "replace": replace,
    }
    try:
        answer = yield HttpRequest("POST", "/schedules", body=_json(schedule))
    except errors.ScheduleExists:
        # The server's words name its body's member; here it is the argument.
        raise errors.ScheduleExists.taken(name, "replace=True") from None
    return decoded(answer, ScheduleAdded)


def _schedule_patch(name: str, paused: bool) -> HttpPlan[bool]:
    """PATCH /schedules/{name}: whether there was one."""
    body = msgspec.json.encode({"paused": paused})
    try:
        yield HttpRequest("PATCH", f"/schedules/{quote(name, safe='')}", body=body)
    except errors.ScheduleNotFound:
        return False
    return True


def schedule_pause(name: str) -> HttpPlan[bool]:
    return _schedule_patch(name, True)


def schedule_resume(name: str) -> HttpPlan[bool]:
    return _schedule_patch(name, False)


def schedule_remove(name: str) -> HttpPlan[bool]:
    """DELETE /schedules/{name}: whether there was one."""
    try:
        yield HttpRequest("DELETE", f"/schedules/{quote(name, safe='')}")
    except errors.ScheduleNotFound:
        return False
    return True


# -- workflows -------------------------------------------------------------------------------


def submit_workflow(
    jobs: Sequence[dict[str, Any]], name: str, idempotency_key: str | None
) -> HttpPlan[SubmittedWorkflow]:
    """POST /workflows: each job a body with its ``parents`` (positions), written all or none.

    A job the server refuses is named by its step, as a client on the store
    names it (``step square(1): ...``), not by the position in the body that
    the server's words give (``job 0: ...``), which the caller never wrote.
    """
    body = {"jobs": list(jobs), "name": name, "idempotency_key": idempotency_key}
    try:
        answer = yield HttpRequest("POST", "/workflows", body=_json(body))
    except errors.InvalidJob as exc:
        raise _by_step(exc, jobs) from None
    return decoded(answer, SubmittedWorkflow)


# How the server names a workflow's job in a refusal: by its position in the body.
_BY_POSITION = re.compile(r"job (\d+): ")
# The longest step's name: a flow's own (taskq.broker.client.flows), so both say the same.
_STEP_NAME_CHARS = 60


def _by_step(exc: errors.InvalidJob, jobs: Sequence[dict[str, Any]]) -> errors.InvalidJob:
    """``exc`` with the job it names by position named as its step instead; as it is when
    it names none."""
    said = _BY_POSITION.match(str(exc))
    if said is None or int(said[1]) >= len(jobs):
        return exc
    where = f"step {_step_name(jobs[int(said[1])])}"
    message = f"{where}: {str(exc)[said.end() :]}"
    if isinstance(exc, errors.UnknownFunction):
        return errors.UnknownFunction(message, field=exc.field, suggestions=exc.suggestions)
    return errors.InvalidJob(message, field=exc.field)


def _step_name(job: dict[str, Any]) -> str:
    """A job's body named as a flow names its step: ``square(1)``, the function and the
    call's arguments, cut short past :data:`_STEP_NAME_CHARS`."""
    arguments = ", ".join(repr(arg) for arg in job.get("args") or ())
    name = f"{str(job['target']).rpartition(':')[2]}({arguments})"
    return name if len(name) <= _STEP_NAME_CHARS else name[: _STEP_NAME_CHARS - 4] + "...)"


def workflow_wait(workflow_id: int, *, timeout: float | None = None) -> HttpPlan[WorkflowInfo]:
    """The workflow read, then a long poll of one of its unfinished jobs (GET /jobs/{id}?wait=)
    until it ends, again, until none is left (spawned jobs join it as their parent ends);
    :class:`taskq.errors.ResultTimeout` after ``timeout``."""
    workflow_id = specs.workflow_id(workflow_id)
    deadline = None if timeout is None else time.monotonic() + timeout
    note_at = note_time(timeout)
    while True:
        view = yield from _workflow_view(workflow_id)
        waiting = [job.id for job in view.jobs if not job.state.finished]
        if not waiting:
            return view.workflow
        if note_at is not None and time.monotonic() >= note_at:
            note_at = None
            if any(job.state is JobState.QUEUED for job in view.jobs):
                query = JobQuery(
                    workflow_id=workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT
                )
                first_queued = yield from job_list(query)
                yield from _note_queued(first_queued, f" of workflow {workflow_id}")
        left = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
        if left <= 0:
            queued: builtins.list[Job] = []
            if any(job.state is JobState.QUEUED for job in view.jobs):
                queued = yield from job_list(
                    JobQuery(workflow_id=workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT)
                )
            workers = (yield from _if_allowed(http_fleet_plans.worker_list())) if queued else None
            raise workflow_wait_ran_out(workflow_id, len(waiting), timeout or 0.0, queued, workers)
        wait = round(min(left, LONG_POLL_SECONDS, _until(note_at)), 3)
        yield HttpRequest("GET", f"/jobs/{waiting[0]}", {"wait": wait}, wait=wait)


class _WorkflowView(msgspec.Struct, frozen=True):
    """The answer of GET /workflows/{id} (``taskq.server.workflows.WorkflowView``)."""

    workflow: WorkflowInfo
    jobs: builtins.list[JobBrief]
    edges: builtins.list[JobEdge]


def _workflow_view(workflow_id: int) -> HttpPlan[_WorkflowView]:
    answer = yield HttpRequest("GET", f"/workflows/{workflow_id}")
    return decoded(answer, _WorkflowView)


def workflow_get(workflow_id: int) -> HttpPlan[WorkflowInfo]:
    view = yield from _workflow_view(specs.workflow_id(workflow_id))
    return view.workflow


def workflow_list(
    *,
    name: str | None = None,
    submitter: str | None = None,
    status: WorkflowStatus | str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> HttpPlan[builtins.list[WorkflowInfo]]:
    """GET /workflows: a page of workflows, newest first, as ``Operations.workflows``."""
    # Checked here as on a store (the limit, the status): the server's refusal would
    # name a query parameter.
    job_validation.check_page_limit(limit)
    if status is not None:
        status = job_validation.parse_workflow_status(status).value
    given = {"name": name, "submitter": submitter, "status": status, "before": before}
    params: dict[str, str | int] = {"limit": limit}
    params |= {key: value for key, value in given.items() if value is not None}
    answer = yield HttpRequest("GET", "/workflows", params)
    return list(decoded_member(answer, "workflows", builtins.list[WorkflowInfo]))


def workflow_jobs(workflow_id: int) -> HttpPlan[builtins.list[JobBrief]]:
    view = yield from _workflow_view(specs.workflow_id(workflow_id))
    return view.jobs


def workflow_edges(workflow_id: int) -> HttpPlan[builtins.list[JobEdge]]:
    view = yield from _workflow_view(specs.workflow_id(workflow_id))
    return view.edges


def _workflow_moved(method: str, path: str) -> HttpPlan[int]:
    try:
        answer = yield HttpRequest(method, path)
    except errors.WrongState:
        return 0
    return int(decoded_member(answer, "moved", int))


def workflow_cancel(workflow_id: int) -> HttpPlan[int]:
    return _workflow_moved("DELETE", f"/workflows/{specs.workflow_id(workflow_id)}")


def workflow_retry(workflow_id: int) -> HttpPlan[int]:
    return _workflow_moved("POST", f"/workflows/{specs.workflow_id(workflow_id)}/retry")
