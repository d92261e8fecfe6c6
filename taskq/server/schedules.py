"""The endpoints of schedules: list, add, pause or resume, and remove periodic jobs."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker import schedule_timing
from taskq.broker.client.client import Schedule, ScheduleAdded
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.by_name import request_specs
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response


class Schedules(msgspec.Struct, frozen=True):
    """Every schedule, by name."""

    schedules: list[Schedule]


async def schedules(request: Request, caller: Caller) -> Response:
    return json_response(Schedules(await client_of(request).schedules()))


async def add_schedule(request: Request, caller: Caller) -> Response:
    """Add a schedule; the same definition again is accepted, another one under its name is 409."""
    body = await bodies.read_body(request)
    sent = bodies.decoded(body, bodies.ScheduleRequest, refused=errors.InvalidSetting)
    client = client_of(request)
    # The job is resolved once, now: its ticks enqueue it as declared today.
    members = [set(msgspec.json.decode(body)["job"])]
    [spec] = await request_specs(client, [sent.job], members, caller.name, [None], label=None)
    try:
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
    except errors.ScheduleExists:
        # The client's words name its flag and argument; over HTTP it is the body's member.
        raise errors.ScheduleExists.taken(sent.name, '"replace": true') from None
    return json_response(added, 201)


async def patch_schedule(request: Request, caller: Caller) -> Response:
    """Pause or resume a schedule; answers the schedule as it now stands."""
    name = request.path_params["name"]
    change = bodies.decoded(
        await bodies.read_body(request), bodies.SchedulePatch, refused=errors.InvalidSetting
    )
    client = client_of(request)
    change_paused = client.pause_schedule if change.paused else client.resume_schedule
    if await change_paused(name):
        # Read after the change: one removed in between is not found, as it is gone.
        for schedule in await client.schedules():
            if schedule.name == name:
                return json_response(schedule)
    raise errors.ScheduleNotFound(f"no schedule named {name!r}")


async def remove_schedule(request: Request, caller: Caller) -> Response:
    name = request.path_params["name"]
    if not await client_of(request).remove_schedule(name):
        raise errors.ScheduleNotFound(f"no schedule named {name!r}")
    return Response(status_code=204)


# The bounds POST /schedules holds a name to (schedule_timing.validate_name): no schedule
# has another, so a name outside them names none, a 404 as any unknown name is.
_NAMED = (("name", schedule_timing.NAME),)

ENDPOINTS = [
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
        "PATCH",
        "/schedules/{name}",
        patch_schedule,
        "admin",
        "Pause or resume a schedule",
        body=bodies.SchedulePatch,
        answer=Schedule,
        named=_NAMED,
    ),
    Endpoint(
        "DELETE",
        "/schedules/{name}",
        remove_schedule,
        "admin",
        "Remove a schedule",
        status=204,
        named=_NAMED,
    ),
]
