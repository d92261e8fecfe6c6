"""The workflow endpoints: submit one whole, read it (jobs' states and edges), cancel, retry.

A body names each job's parents by their positions in its list of jobs,
which is how JSON can draw any DAG. Each job is made as ``POST /jobs`` makes
one (its target's declared options, its arguments checked, an undeclared
target refused unless ``unchecked``: ``taskq.server.by_name``); the whole
then becomes the Python client's flow
(``taskq.step``, ``group``, ``then``) and so goes through the same checks
and the same single atomic write as ``client.submit_workflow``. The shape
is checked first, so a cycle or a position out of range is refused naming
``parents`` and the job at fault, in the body's own numbering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any
from urllib.parse import urlencode

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker import job_validation, workflow_shape
from taskq.broker.client.client import AsyncClient, validate_spec
from taskq.broker.client.flows import Flow, group, step
from taskq.broker.client.job_request import JobRequest
from taskq.broker.records import (
    JobBrief,
    JobEdge,
    JobSpec,
    SubmittedWorkflow,
    WorkflowInfo,
    WorkflowStatus,
)
from taskq.server import bodies, problems
from taskq.server.auth import Caller
from taskq.server.by_name import request_specs
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response
from taskq.server.query import IDEMPOTENCY_KEY, PAGE, TEXT, Param, one_key, one_of


class WorkflowJob(JobRequest, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One job of a workflow: a job as ``POST /jobs`` takes it, and its parents in the workflow."""

    parents: Annotated[
        list[Annotated[int, job_validation.PARENT_POSITION.schema()]],
        msgspec.Meta(
            description="positions (from 0) in the workflow's jobs of the jobs this one runs "
            "after: it waits until every one has ended"
        ),
    ] = msgspec.field(default_factory=list)
    # A job of a workflow waits only on its own (parents), and the workflow's key names all
    # its jobs: the schema says these two members stay empty, and _check_shape refuses them,
    # naming the job and what to write instead.
    after: Annotated[
        tuple[int, ...],
        msgspec.Meta(
            description="not taken: a workflow's jobs wait on each other, named in parents",
            extra_json_schema={"maxItems": 0},
        ),
    ] = ()
    idempotency_key: Annotated[
        str | None,
        msgspec.Meta(
            description="not taken: the workflow's own idempotency_key names all its jobs",
            extra_json_schema={"type": "null"},
        ),
    ] = None


class WorkflowRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A whole workflow, written in one atomic write: every job and dependency, or nothing.

    The submitter is not a member: it is the name of the request's token.
    """

    # The broker refuses a workflow of no jobs (taskq.broker.ops.workflows), as this says.
    jobs: Annotated[list[WorkflowJob], msgspec.Meta(extra_json_schema={"minItems": 1})]
    name: str = ""
    idempotency_key: Annotated[
        str | None,
        msgspec.Meta(
            description="sending the same workflow under the same key again answers the same "
            "ids (the Idempotency-Key header does the same; given both, they must be the "
            "same)"
        ),
    ] = None


class WorkflowView(msgspec.Struct, frozen=True):
    """A workflow: its record with counts per state, its jobs oldest first, its dependencies."""

    workflow: WorkflowInfo
    jobs: list[JobBrief]
    edges: list[JobEdge]


class WorkflowPage(msgspec.Struct, frozen=True):
    """Workflows newest first, each with its counts per state; ``next`` is the URL of the
    following page, None at the end."""

    workflows: list[WorkflowInfo]
    next: str | None


class WorkflowMoved(msgspec.Struct, frozen=True):
    """How many of the workflow's jobs a cancel or a retry moved, and the workflow after it."""

    moved: int
    workflow: WorkflowInfo


class _Prepared:
    """A job already made from its body, as a step takes a declared job (``spec()``)."""

    def __init__(self, job: JobSpec) -> None:
        self._job = job

    def spec(self, *args: Any, **kwargs: Any) -> JobSpec:
        return self._job


def _workflow_id(request: Request) -> int:
    return bodies.id_in_path(request, "workflow_id", "workflow", errors.WorkflowNotFound)


def _check_shape(sent: WorkflowRequest) -> None:
    """Refuse a workflow whose parents draw no DAG, or whose jobs name what only a job alone may.

    InvalidJob naming the job by its position in the body.
    """
    try:
        workflow_shape.check_workflow_shape(len(sent.jobs), [job.parents for job in sent.jobs], ())
    except errors.InvalidJob as exc:
        raise errors.InvalidJob(str(exc), field="parents") from None
    for index, job in enumerate(sent.jobs):
        if job.after:
            raise errors.InvalidJob(
                f"job {index} runs after stored jobs {list(job.after)}, but a new workflow's jobs "
                "wait only on each other: name them by position in parents",
                field="after",
            )
        if job.idempotency_key is not None:
            raise errors.InvalidJob(
                f"job {index} brings its own idempotency_key; the workflow's names all its jobs",
                field="idempotency_key",
            )


def _flow(sent: WorkflowRequest, specs: Sequence[JobSpec]) -> tuple[Flow, Flow]:
    """The workflow of ``specs`` (its jobs, made), and its steps side by side in the body's
    order (for their ids). InvalidJob names the job by its position in the body."""
    steps = []
    for index, spec in enumerate(specs):
        try:
            validate_spec(spec)
        except errors.InvalidJob as exc:
            raise errors.InvalidJob(f"job {index}: {exc}", field=exc.field) from None
        steps.append(step(_Prepared(spec)))
    parts = [
        group(*(steps[parent] for parent in job.parents)).then(steps[index])
        if job.parents
        else steps[index]
        for index, job in enumerate(sent.jobs)
    ]
    return group(*parts), group(*steps)


def _by_position(index: int) -> str:
    """How a refusal names a workflow's job: by the position its ``parents`` use."""
    return f"job {index}"


# A job array sent here is the easy mix-up: POST /jobs takes one as a batch.
_SHAPE = bodies.Shape(
    'a workflow is an object with its jobs in "jobs": {"jobs": [{"target": "pkg.mod:func", '
    '"parents": []}, ...]} (an array of jobs alone is a batch, for POST /jobs)',
    field="jobs",
)


async def submit(request: Request, caller: Caller) -> Response:
    body = await bodies.read_body(request)
    sent = bodies.decoded(body, WorkflowRequest, shape=_SHAPE)
    if not sent.jobs:
        raise errors.InvalidJob("a workflow needs at least one job", field="jobs")
    key = one_key(request, sent.idempotency_key)
    _check_shape(sent)
    client = client_of(request)
    members = [set(job) for job in msgspec.json.decode(body)["jobs"]]
    # A step's parents are the workflow's: it takes run_anyway without after.
    specs = await request_specs(
        client,
        sent.jobs,
        members,
        caller.name,
        [None] * len(sent.jobs),
        label=_by_position,
        alone=False,
    )
    flow, in_body_order = _flow(sent, specs)
    try:
        handle = await client.submit_workflow(
            flow, name=sent.name, idempotency_key=key, submitter=caller.name
        )
    except errors.IdempotencyConflict as exc:
        return await _key_taken(client, exc)
    ids = tuple(job.id for job in await handle.jobs(in_body_order))
    answer = SubmittedWorkflow(id=handle.id, job_ids=ids)
    return json_response(answer, 201, {"Location": f"/workflows/{handle.id}"})


async def _key_taken(client: AsyncClient, exc: errors.IdempotencyConflict) -> Response:
    """The 409 of a key that names another workflow, naming it (``workflow_id``), not its
    first job, which is all the store's error carries (``job_id``): read from that job.
    Should it be gone (pruned since), the conflict is answered as the store said it."""
    try:
        workflow_id = (await client.get(exc.job_id)).workflow_id if exc.job_id else None
    except errors.JobNotFound:
        workflow_id = None
    if workflow_id is None:
        raise exc
    return problems.workflow_key_taken(exc, workflow_id)


_LIST_PARAMS = (
    Param("name", TEXT, "only the workflows of this name"),
    Param("submitter", TEXT, "only the workflows this token's name submitted"),
    Param("status", one_of(WorkflowStatus), "only the workflows of this status"),
    *PAGE,
)
_LIST_FILTERS = ("name", "submitter", "status")


async def listing(request: Request, caller: Caller) -> Response:
    """A page of workflows, newest first, keyset-paged by ``before`` (the last id seen)."""
    params = request.query_params
    bodies.only_known(params, {param.name for param in _LIST_PARAMS})
    limit, before = bodies.keyset(params)
    filters = {name: params[name] for name in _LIST_FILTERS if name in params}
    found = await client_of(request).workflows(
        name=filters.get("name"),
        submitter=filters.get("submitter"),
        status=bodies.choice(params, "status", WorkflowStatus),
        before=before,
        limit=limit,
    )
    following = None
    if len(found) == limit:
        following = f"/workflows?{urlencode({**filters, 'limit': limit, 'before': found[-1].id})}"
    return json_response(WorkflowPage(found, following))


async def get(request: Request, caller: Caller) -> Response:
    client = client_of(request)
    workflow_id = _workflow_id(request)
    info = await client.workflow(workflow_id)
    # Edges before jobs: a spawn writes its jobs with their edges, so every job an
    # edge names is among the jobs read after it.
    edges = await client.workflow_edges(workflow_id)
    jobs = await client.workflow_jobs(workflow_id)
    return json_response(WorkflowView(info, jobs, edges))


async def cancel(request: Request, caller: Caller) -> Response:
    """Cancel every job of the workflow that has not ended (running ones at their heartbeat)."""
    client = client_of(request)
    workflow_id = _workflow_id(request)
    moved = await client.cancel_workflow(workflow_id)
    if not moved:
        raise errors.WrongState(
            f"workflow {workflow_id} has no job left to cancel: every one has ended"
        )
    return json_response(WorkflowMoved(moved, await client.workflow(workflow_id)))


async def retry(request: Request, caller: Caller) -> Response:
    """Queue the workflow's failed, dead or cancelled jobs again (their cancelled children wait)."""
    client = client_of(request)
    workflow_id = _workflow_id(request)
    moved = await client.retry_workflow(workflow_id)
    if not moved:
        raise errors.WrongState(
            f"workflow {workflow_id} has no job to retry: none failed, died or was cancelled"
        )
    return json_response(WorkflowMoved(moved, await client.workflow(workflow_id)))


_NAMED = (("workflow_id", bodies.WHOLE_ID),)

ENDPOINTS = [
    Endpoint(
        "POST",
        "/workflows",
        submit,
        "submit",
        "Submit a whole workflow (jobs and their parents by position) in one atomic write",
        body=WorkflowRequest,
        answer=SubmittedWorkflow,
        status=201,
        params=(IDEMPOTENCY_KEY,),
    ),
    Endpoint(
        "GET",
        "/workflows",
        listing,
        "read",
        "Workflows newest first, each with its jobs' counts per state and its status "
        "(filters: name, submitter, status; pages: limit, before)",
        answer=WorkflowPage,
        params=_LIST_PARAMS,
    ),
    Endpoint(
        "GET",
        "/workflows/{workflow_id}",
        get,
        "read",
        "A workflow: counts per state, its jobs' states, its edges",
        answer=WorkflowView,
        named=_NAMED,
    ),
    Endpoint(
        "DELETE",
        "/workflows/{workflow_id}",
        cancel,
        "submit",
        "Cancel a workflow's unfinished jobs",
        answer=WorkflowMoved,
        named=_NAMED,
    ),
    Endpoint(
        "POST",
        "/workflows/{workflow_id}/retry",
        retry,
        "submit",
        "Retry a workflow's failed, dead or cancelled jobs",
        answer=WorkflowMoved,
        named=_NAMED,
    ),
]
