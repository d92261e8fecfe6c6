"""The job endpoints: submit (one or a batch), read (a job's relatives too), follow, list by
pages, cancel and retry (one job, or many in one write)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker.client.client import CancelResult, JobQuery
from taskq.broker.client.http_requests import LONG_POLL_SECONDS
from taskq.broker.client.job_request import JobRequest
from taskq.broker.records import MAX_RELATIVES, Execution, Job, JobState, Relatives
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.by_name import request_specs
from taskq.server.endpoint import Endpoint, client_of, unless_cut_short
from taskq.server.problems import json_response
from taskq.server.query import (
    ID,
    IDEMPOTENCY_KEY,
    PAGE,
    TEXT,
    Param,
    header_key,
    one_key,
    one_of,
    seconds,
    whole,
)

# The longest a request is held open (a result, a job waited for): under the usual
# proxies' idle timeouts. The HTTP client asks for no longer.
MAX_WAIT_SECONDS = LONG_POLL_SECONDS
# A retry moves only jobs that ended without succeeding.
_RETRYABLE = frozenset({JobState.FAILED, JobState.DEAD, JobState.CANCELLED})
# The most ids one cancel or retry of many takes: a full page of GET /jobs.
MAX_IDS = bodies.MAX_PAGE
JOB_ID = bodies.WHOLE_ID
_NAMED = (("job_id", JOB_ID),)
# One job, or a batch of one or more; a batch of none is refused (a 422), as a cancel or
# a retry of no ids is, and the document says so.
_JOBS = JobRequest | Annotated[list[JobRequest], msgspec.Meta(extra_json_schema={"minItems": 1})]


class Submitted(msgspec.Struct, frozen=True, omit_defaults=True):
    """``id`` of a job sent alone, ``ids`` of a batch's jobs in the order sent.

    A repeated idempotent request answers the same job(s) again.
    """

    id: int | None = None
    ids: list[int] | None = None


class JobPage(msgspec.Struct, frozen=True):
    """Jobs newest first; ``next`` is the URL of the following page, None at the end."""

    jobs: list[Job]
    next: str | None


class Executions(msgspec.Struct, frozen=True):
    """A job's attempts, oldest first."""

    executions: list[Execution]


class JobResult(msgspec.Struct, frozen=True):
    """A job's outcome: its result when it succeeded, its error when it ended otherwise."""

    id: int
    state: JobState
    finished: bool
    result: Any
    error: dict[str, Any] | None


class JobIds(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The jobs a cancel or a retry of many moves, in one write; an id given twice counts once.

    The store decides, as for ``client.cancel(*ids)`` on it: the first id no job
    has (an id outside the bounds stated here among them) is a 404 naming it,
    and then no job moves.
    """

    ids: Annotated[
        list[
            Annotated[int, msgspec.Meta(extra_json_schema={"minimum": 1, "maximum": bodies.MAX_ID})]
        ],
        msgspec.Meta(min_length=1, max_length=MAX_IDS),
    ]


class Retried(msgspec.Struct, frozen=True):
    """The ids of the jobs a retry of many queued again (or set waiting for their parents),
    ascending; a job that was not failed, dead or cancelled is not among them. ``revived``:
    the jobs their ends had cancelled, brought back with them (waiting again), ascending."""

    retried: list[int]
    revived: list[int]


_SHAPE = bodies.Shape(
    'a job is an object, {"target": "pkg.mod:func", ...}, and a batch an array of them'
)


def job_id_in_path(request: Request) -> int:
    """The job id of a path such as /jobs/{job_id} (:func:`bodies.id_in_path`)."""
    return bodies.id_in_path(request, "job_id", "job", errors.JobNotFound)


async def submit(request: Request, caller: Caller) -> Response:
    body = await bodies.read_body(request)
    key = header_key(request)
    client = client_of(request)
    sent = bodies.decoded(body, _JOBS, shape=_SHAPE)
    given = bodies.members(body)
    if isinstance(sent, list):
        if not sent:
            raise errors.InvalidJob("a batch needs at least one job")
        # One header names the whole batch; each job gets a key of its own from it.
        keys = [f"{key}:{index}" if key else None for index in range(len(sent))]
        specs = await request_specs(client, sent, given, caller.name, keys)
        handles = await client.submit_many(specs)
        return json_response(Submitted(ids=[handle.id for handle in handles]), 201)
    key = one_key(request, sent.idempotency_key)
    [spec] = await request_specs(client, [sent], given, caller.name, [key], label=None)
    handle = await client.submit_spec(spec)
    return json_response(Submitted(id=handle.id), 201, {"Location": f"/jobs/{handle.id}"})


_WAIT = Param(
    "wait",
    seconds(MAX_WAIT_SECONDS),
    "answer once the job has ended, or after this many seconds (0 by default: at once)",
)
_TIMEOUT = Param(
    "timeout",
    seconds(MAX_WAIT_SECONDS),
    "wait this many seconds at most for the job to end (0 by default); 202 if it has not",
)
_RELATIVES_LIMIT = Param(
    "limit", whole(1, MAX_RELATIVES), "at most this many of each kind (100 by default)"
)


async def get(request: Request, caller: Caller) -> Response:
    """The job; with ``?wait=SECONDS``, once it has finished or that long has passed."""
    params = request.query_params
    bodies.only_known(params, {_WAIT.name})
    wait = bodies.number(params, "wait", default=0.0, high=MAX_WAIT_SECONDS)
    return json_response(await _waited(request, job_id_in_path(request), wait))


async def result(request: Request, caller: Caller) -> Response:
    """The outcome, waiting up to ``timeout`` seconds: 200 when finished, 202 when not yet."""
    params = request.query_params
    bodies.only_known(params, {_TIMEOUT.name})
    wait = bodies.number(params, "timeout", default=0.0, high=MAX_WAIT_SECONDS)
    job = await _waited(request, job_id_in_path(request), wait)
    outcome = JobResult(job.id, job.state, job.state.finished, job.result, job.error)
    return json_response(outcome, 200 if job.state.finished else 202)


async def _waited(request: Request, job_id: int, wait: float) -> Job:
    """The job once it has finished, else as it is now: when ``wait`` seconds have passed
    (none asked: at once, one read rather than a wait that runs out and reads again), or as
    soon as the server starts to stop (the long poll is answered, not cut off); a token
    revoked meanwhile is refused as it would be now."""
    client = client_of(request)
    if wait:
        try:
            job = await unless_cut_short(request, client.wait(job_id, timeout=wait))
        except errors.ResultTimeout:
            job = None
        if job is not None:
            return job
    return await client.get(job_id)


async def executions(request: Request, caller: Caller) -> Response:
    client = client_of(request)
    job_id = job_id_in_path(request)
    found = await client.executions(job_id)
    if not found:
        await client.get(job_id)  # JobNotFound for an unknown id, not an empty list
    return json_response(Executions(found))


async def relatives(request: Request, caller: Caller) -> Response:
    """The job's parents and children, its spawner and the jobs it spawned, with their states;
    at most ``limit`` (1 to 10,000, the client's 100 by default) on each side."""
    params = request.query_params
    bodies.only_known(params, {_RELATIVES_LIMIT.name})
    given = (
        {"limit": bodies.integer(params, "limit", low=1, high=MAX_RELATIVES)}
        if "limit" in params
        else {}
    )
    client = client_of(request)
    job_id = job_id_in_path(request)
    return json_response(await client.relatives(job_id, **given))


_LIST_PARAMS = (
    Param("state", one_of(JobState), "only the jobs in this state"),
    Param("queue", TEXT, "only the jobs of this queue"),
    Param("submitter", TEXT, "only the jobs this token's name submitted"),
    Param("worker", TEXT, "only the jobs this worker ran last"),
    Param("workflow", ID, "only the jobs of this workflow (an id no workflow has: 404)"),
    Param(
        "text",
        TEXT,
        "only the jobs of this queue, or whose payload (target, arguments) holds this text",
    ),
    *PAGE,
)
_LIST_FILTERS = {param.name for param in _LIST_PARAMS} - {param.name for param in PAGE}


async def listing(request: Request, caller: Caller) -> Response:
    """A page of jobs, newest first, keyset-paged by ``before`` (the last id seen)."""
    params = request.query_params
    bodies.only_known(params, {param.name for param in _LIST_PARAMS})
    limit, before = bodies.keyset(params)
    filters = {name: params[name] for name in _LIST_FILTERS if params.get(name)}
    workflow_id = (
        bodies.integer(params, "workflow", low=1, high=bodies.MAX_ID)
        if "workflow" in filters
        else None
    )
    query = JobQuery(
        state=bodies.choice(params, "state", JobState),
        queue=filters.get("queue"),
        submitter=filters.get("submitter"),
        worker_id=filters.get("worker"),
        text=filters.get("text"),
        workflow_id=workflow_id,
        before=before,
        limit=limit,
    )
    client = client_of(request)
    jobs = await client.list(query)
    if not jobs and workflow_id is not None:
        # An unknown workflow is a 404, as GET /workflows/{id} and taskq jobs --workflow
        # have it, not a workflow of no jobs; read only when the page is empty.
        await client.workflow(workflow_id)
    following = None
    if len(jobs) == limit:
        following = f"/jobs?{urlencode({**filters, 'limit': limit, 'before': jobs[-1].id})}"
    return json_response(JobPage(jobs, following))


async def cancel(request: Request, caller: Caller) -> Response:
    """Cancel: a queued job at once, a running one at its worker's next heartbeat."""
    client = client_of(request)
    job_id = job_id_in_path(request)
    done = await client.cancel(job_id)
    job = await client.get(job_id)
    if not done.cancelled and not done.requested:
        raise errors.WrongState(f"job {job_id} ({job.state.value}): already ended, not cancelled")
    return json_response(job)


async def retry(request: Request, caller: Caller) -> Response:
    """Queue a failed, dead or cancelled job again."""
    client = client_of(request)
    job_id = job_id_in_path(request)
    moved = await client.retry(job_id)
    job = await client.get(job_id)
    if not moved and job.state not in _RETRYABLE:
        raise errors.WrongState(
            f"job {job_id} ({job.state.value}): only failed, dead or cancelled jobs are retried"
        )
    return json_response(job)


async def cancel_many(request: Request, caller: Caller) -> Response:
    """Cancel the body's jobs in one write, as ``client.cancel(*ids)`` does on the store:
    those it ended and those running it asked to stop; an ended job is in neither."""
    sent: JobIds = bodies.decoded(await bodies.read_body(request), JobIds)
    return json_response(await client_of(request).cancel(*sent.ids))


async def retry_many(request: Request, caller: Caller) -> Response:
    """Queue the body's failed, dead or cancelled jobs again in one write, as
    ``client.retry(*ids)`` does on the store; any other job stays as it is."""
    sent: JobIds = bodies.decoded(await bodies.read_body(request), JobIds)
    moved = await client_of(request).retry(*sent.ids)
    return json_response(Retried(list(moved), list(moved.revived)))


ENDPOINTS = [
    Endpoint(
        "POST",
        "/jobs",
        submit,
        "submit",
        "Submit one job (an object), or a batch (an array) in one atomic write",
        body=_JOBS,
        answer=Submitted,
        status=201,
        params=(IDEMPOTENCY_KEY,),
    ),
    Endpoint(
        "GET",
        "/jobs",
        listing,
        "read",
        "List jobs, newest first",
        answer=JobPage,
        params=_LIST_PARAMS,
    ),
    Endpoint(
        "GET",
        "/jobs/{job_id}",
        get,
        "read",
        "One job; with ?wait=SECONDS (up to 60), once it has finished or that long has passed",
        answer=Job,
        named=_NAMED,
        params=(_WAIT,),
    ),
    Endpoint(
        "GET",
        "/jobs/{job_id}/result",
        result,
        "read",
        "A job's outcome, waiting up to ?timeout= seconds (202 while unfinished)",
        answer=JobResult,
        also=((202, "The job has not finished yet: its state now"),),
        named=_NAMED,
        params=(_TIMEOUT,),
    ),
    Endpoint(
        "GET",
        "/jobs/{job_id}/executions",
        executions,
        "read",
        "A job's attempts, oldest first",
        answer=Executions,
        named=_NAMED,
    ),
    Endpoint(
        "GET",
        "/jobs/{job_id}/relatives",
        relatives,
        "read",
        "A job's parents, children, spawner and spawned jobs with their states "
        "(at most ?limit= of each, 1 to 10,000, default 100)",
        answer=Relatives,
        named=_NAMED,
        params=(_RELATIVES_LIMIT,),
    ),
    Endpoint(
        "DELETE", "/jobs/{job_id}", cancel, "submit", "Cancel a job", answer=Job, named=_NAMED
    ),
    Endpoint(
        "POST", "/jobs/{job_id}/retry", retry, "submit", "Retry a job", answer=Job, named=_NAMED
    ),
    Endpoint(
        "POST",
        "/jobs/cancel",
        cancel_many,
        "submit",
        "Cancel many jobs in one write; none if an id names no job (404)",
        body=JobIds,
        answer=CancelResult,
    ),
    Endpoint(
        "POST",
        "/jobs/retry",
        retry_many,
        "submit",
        "Retry many jobs in one write; none if an id names no job (404)",
        body=JobIds,
        answer=Retried,
    ),
]
