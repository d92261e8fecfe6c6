"""The endpoints of queues, workers and schedules: what the fleet is doing, and its settings."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker.client.client import KEEP, Schedule, ScheduleAdded
from taskq.broker.client.problem_types import ScheduleNotFound
from taskq.broker.records import Execution, QueueStats, WorkerInfo
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.by_name import request_specs
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response


class Queues(msgspec.Struct, frozen=True):
    """Every queue: counts per state, paused or not, limits."""

    queues: list[QueueStats]


class Workers(msgspec.Struct, frozen=True):
    """Every registered worker, stopped and lost ones included."""

    workers: list[WorkerInfo]


class WorkerExecutions(msgspec.Struct, frozen=True):
    """A worker's attempts, newest first; ``next`` is the following page's URL."""

    executions: list[Execution]
    next: str | None


class Schedules(msgspec.Struct, frozen=True):
    """Every schedule, by name."""

    schedules: list[Schedule]


async def queues(request: Request, caller: Caller) -> Response:
    return json_response(Queues(await client_of(request).stats()))


async def patch_queue(request: Request, caller: Caller) -> Response:
    """Pause or resume a queue, or change its limits; answers the queue as it now stands."""
    name = request.path_params["name"]
    change = bodies.decoded(await bodies.read_body(request), bodies.QueuePatch)
    client = client_of(request)
    limits_given = change.max_running is not msgspec.UNSET or change.rate_limit is not msgspec.UNSET
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
        )
    for stats in await client.stats():
        if stats.queue == name:
            return json_response(stats)
    raise errors.QueueNotFound(f"no queue named {name!r} (it has no jobs and no settings)")


async def workers(request: Request, caller: Caller) -> Response:
    return json_response(Workers(await client_of(request).workers()))


async def worker_executions(request: Request, caller: Caller) -> Response:
    params = request.query_params
    bodies.only_known(params, {"before", "limit"})
    limit, before = bodies.keyset(params)
    worker_id = request.path_params["worker_id"]
    found = await client_of(request).worker_executions(worker_id, before=before, limit=limit)
    following = None
    if len(found) == limit:
        following = f"/workers/{worker_id}/executions?limit={limit}&before={found[-1].id}"
    return json_response(WorkerExecutions(found, following))


async def schedules(request: Request, caller: Caller) -> Response:
    return json_response(Schedules(await client_of(request).schedules()))


async def add_schedule(request: Request, caller: Caller) -> Response:
    """Add a schedule; the same definition again is accepted, another one under its name is 409."""
    body = await bodies.read_body(request)
    sent = bodies.decoded(body, bodies.ScheduleRequest)
    client = client_of(request)
    # The job is resolved once, now: its ticks enqueue it as declared today.
    members = [set(msgspec.json.decode(body)["job"])]
    [spec] = await request_specs(client, [sent.job], members, caller.name, [None], numbered=False)
    added = await client.add_schedule(
        sent.name,
        spec,
        cron=sent.cron,
        every_seconds=sent.every_seconds,
        timezone=sent.timezone,
        catch_up=sent.catch_up,
        replace=sent.replace,
        unchecked=True,  # resolved, or opted out, just above
    )
    return json_response(added, 201)


async def remove_schedule(request: Request, caller: Caller) -> Response:
    name = request.path_params["name"]
    if not await client_of(request).remove_schedule(name):
        raise ScheduleNotFound(f"no schedule named {name!r}")
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
    ),
    Endpoint("GET", "/workers", workers, "read", "Every worker", answer=Workers),
    Endpoint(
        "GET",
        "/workers/{worker_id}/executions",
        worker_executions,
        "read",
        "A worker's attempts, newest first",
        answer=WorkerExecutions,
    ),
    Endpoint("GET", "/schedules", schedules, "read", "Every schedule", answer=Schedules),
    Endpoint(
        "POST",
        "/schedules",
        add_schedule,
        "admin",
        "Add a schedule",
        body=bodies.ScheduleRequest,
        answer=ScheduleAdded,
        status=201,
    ),
    Endpoint(
        "DELETE", "/schedules/{name}", remove_schedule, "admin", "Remove a schedule", status=204
    ),
]
