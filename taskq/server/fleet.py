"""The endpoints of queues, workers and submitters: what the fleet is doing, and its settings."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client.client import KEEP, SubmitLimit
from taskq.broker.records import Execution, QueueStats, WorkerInfo
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response
from taskq.server.query import PAGE


class Queues(msgspec.Struct, frozen=True):
    """Every queue: counts per state, paused or not, limits; and which live workers serve."""

    queues: list[QueueStats]
    served: list[str] = []
    """The queues at least one live worker takes jobs from (``Client.served_queues``), by
    the store's clock: a client's own may be off."""


class Workers(msgspec.Struct, frozen=True):
    """Every registered worker, stopped and lost ones included."""

    workers: list[WorkerInfo]


class SubmitLimits(msgspec.Struct, frozen=True):
    """Every submitter's limit, "*" (everyone without one of their own) included."""

    submit_limits: list[SubmitLimit]


class WorkerExecutions(msgspec.Struct, frozen=True):
    """A worker's attempts, newest first; ``next`` is the following page's URL."""

    executions: list[Execution]
    next: str | None


async def queues(request: Request, caller: Caller) -> Response:
    client = client_of(request)
    return json_response(Queues(await client.stats(), sorted(await client.served_queues())))


async def patch_queue(request: Request, caller: Caller) -> Response:
    """Pause or resume a queue, or change its limits; answers the queue as it now stands."""
    name = request.path_params["name"]
    change = bodies.decoded(
        await bodies.read_body(request), bodies.QueuePatch, refused=errors.InvalidSetting
    )
    client = client_of(request)
    limits_given = change.max_running is not msgspec.UNSET or change.rate_limit is not msgspec.UNSET
    try:
        if change.paused is not msgspec.UNSET:
            if change.paused:
                await client.pause(name, create=change.create)
            else:
                await client.resume(name, create=change.create)
        if limits_given:
            await client.set_queue_limits(
                name,
                max_running=KEEP if change.max_running is msgspec.UNSET else change.max_running,
                rate_limit=KEEP if change.rate_limit is msgspec.UNSET else change.rate_limit,
                rate_period=change.rate_period,
                create=change.create,
            )
    except errors.QueueNotFound:
        # The client's words name its flag and argument; over HTTP it is the body's member.
        raise errors.QueueNotFound.not_created(name, "change it", '"create": true') from None
    for stats in await client.stats():
        if stats.queue == name:
            return json_response(stats)
    raise errors.QueueNotFound(f"no queue named {name!r} (it has no jobs and no settings)")


async def workers(request: Request, caller: Caller) -> Response:
    return json_response(Workers(await client_of(request).workers()))


async def worker_executions(request: Request, caller: Caller) -> Response:
    params = request.query_params
    bodies.only_known(params, {param.name for param in PAGE})
    limit, before = bodies.keyset(params)
    worker_id = request.path_params["worker_id"]
    found = await client_of(request).worker_executions(worker_id, before=before, limit=limit)
    following = None
    if len(found) == limit:
        following = f"/workers/{worker_id}/executions?limit={limit}&before={found[-1].id}"
    return json_response(WorkerExecutions(found, following))


async def submit_limits(request: Request, caller: Caller) -> Response:
    return json_response(SubmitLimits(await client_of(request).submit_limits()))


async def put_submit_limit(request: Request, caller: Caller) -> Response:
    """Set a submitter's limit (a token's name, or "*"); answers it."""
    submitter = request.path_params["submitter"]
    limit = bodies.decoded(
        await bodies.read_body(request), bodies.SubmitLimitRequest, refused=errors.InvalidSetting
    )
    await client_of(request).set_submit_limit(submitter, limit.rate, limit.period)
    return json_response(SubmitLimit(submitter, limit.rate, limit.period))


async def remove_submit_limit(request: Request, caller: Caller) -> Response:
    """Lift a submitter's own limit, if it has one (the "*" limit, if any, applies again)."""
    await client_of(request).remove_submit_limit(request.path_params["submitter"])
    return Response(status_code=204)


ENDPOINTS = [
    Endpoint("GET", "/queues", queues, "read", "Every queue", answer=Queues),
    Endpoint(
        "PATCH",
        "/queues/{name}",
        patch_queue,
        "admin",
        "Pause, resume or limit a queue",
        body=bodies.QueuePatch,
        answer=QueueStats,
        named=(("name", job_validation.NAME),),
    ),
    Endpoint("GET", "/workers", workers, "read", "Every worker", answer=Workers),
    Endpoint(
        "GET",
        "/workers/{worker_id}/executions",
        worker_executions,
        "read",
        "A worker's attempts, newest first",
        answer=WorkerExecutions,
        params=PAGE,
    ),
    Endpoint(
        "GET",
        "/submit-limits",
        submit_limits,
        "read",
        "Every submitter's rate limit",
        answer=SubmitLimits,
    ),
    Endpoint(
        "PUT",
        "/submit-limits/{submitter}",
        put_submit_limit,
        "admin",
        "Limit a submitter's rate",
        body=bodies.SubmitLimitRequest,
        answer=SubmitLimit,
        named=(("submitter", job_validation.NAME),),
    ),
    Endpoint(
        "DELETE",
        "/submit-limits/{submitter}",
        remove_submit_limit,
        "admin",
        "Lift a submitter's own rate limit",
        status=204,
    ),
]
