"""A job's output over HTTP: what is stored now as JSON, or followed live as Server-Sent Events.

``GET /jobs/{id}/output`` answers the pieces the latest attempt (or
``?attempt=N``, its latest run) has stored, from byte ``?offset=`` on. With
``?follow=true`` it streams them as ``text/event-stream`` until the job ends:
each event's type is the piece's (``text``, ``dropped``, ``attempt_ended``),
its data the piece as JSON, and its id ``ATTEMPT:END`` (``ATTEMPT.RUN:END``
for the RUNth run of an attempt, counted from 1, when workers handed the job
back and the attempt's number ran again), so that a client that lost the
stream resumes the very run it was reading, where it was, by sending that id
back as ``Last-Event-ID`` (browsers' ``EventSource`` does so by itself). A
quiet spell is broken by a comment line every ``KEEP_ALIVE_SECONDS``. A token
revoked as the stream is followed ends it with an event of type ``problem``,
its data the 401 (or 403) problem the request would meet now.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from taskq import errors
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.http_output import event_id
from taskq.broker.records import AttemptEnded, OutputEvent
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.endpoint import Endpoint, client_of, cut_short
from taskq.server.jobs import JOB_ID, job_id_in_path
from taskq.server.problems import json_response, problem_event
from taskq.server.query import Param, whole

KEEP_ALIVE_SECONDS = 15.0
"""How long a followed stream may stay quiet before it sends a comment line.

Proxies and load balancers close a connection idle for longer than their
timeout (commonly 30 to 60 s), and a job may print nothing for hours: the
comment, which ``EventSource`` ignores, keeps the stream open."""

_KEEP_ALIVE = b": keep-alive\n\n"
# Tells proxies (nginx) to pass each event on at once rather than buffer the stream.
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_MOST_ATTEMPTS = 1_000_000
# Last-Event-ID's run is held to the same bound: no attempt is handed back that often.
_MOST_RUNS = _MOST_ATTEMPTS
# The most of a refused Last-Event-ID a problem's detail repeats.
_SHOWN_CHARS = 60


class OutputPage(msgspec.Struct, frozen=True):
    """The pieces of an attempt's output stored now, in order."""

    events: list[OutputEvent]


def _position(request: Request) -> tuple[int | None, int | None, int]:
    """Where to begin: the attempt, run and byte of ``Last-Event-ID``, else of the query
    (whose attempt is that number's latest run: None for the run).

    The header is held to the query's bounds: an offset past what the store holds
    would fail there (a 500), as ``bodies.integer`` says of the query's."""
    resumed = request.headers.get("last-event-id")
    if resumed:
        numbers, _, byte = resumed.partition(":")
        number, dot, counted = numbers.partition(".")
        attempt, offset = _whole(number, 1, _MOST_ATTEMPTS), _whole(byte, 0, bodies.MAX_ID)
        # No ".RUN": the attempt's first run, whose ids the server writes so.
        run = _whole(counted, 1, _MOST_RUNS) if dot else 1
        if attempt is None or run is None or offset is None:
            shown = resumed if len(resumed) <= _SHOWN_CHARS else resumed[:_SHOWN_CHARS] + "..."
            raise errors.BadRequest(
                "Last-Event-ID must be ATTEMPT:OFFSET or ATTEMPT.RUN:OFFSET, as the events' ids "
                f"(ATTEMPT from 1 to {_MOST_ATTEMPTS}, RUN from 1 to {_MOST_RUNS}, OFFSET from "
                f"0 to {bodies.MAX_ID}), not {shown!r}"
            )
        return attempt, run, offset
    params = request.query_params
    attempt = None
    if "attempt" in params:
        attempt = bodies.integer(params, "attempt", low=1, high=_MOST_ATTEMPTS)
    return attempt, None, bodies.integer(params, "offset") if "offset" in params else 0


def _whole(text: str, low: int, high: int) -> int | None:
    """``text`` as a whole number from ``low`` to ``high``, else None. ASCII digits only, and
    no more of them (leading zeros aside) than ``high`` has: ``int`` refuses other digits
    (``"²"``) and texts past its limit of digits with a ValueError, which would be a 500."""
    if not (text.isascii() and text.isdigit() and len(text.lstrip("0")) <= len(str(high))):
        return None
    value = int(text)
    return value if low <= value <= high else None


async def output(request: Request, caller: Caller) -> Response:
    params = request.query_params
    bodies.only_known(params, {param.name for param in _PARAMS})
    follow = params.get("follow", "false").lower()
    if follow not in ("true", "false"):
        raise errors.BadRequest(f"query parameter follow must be true or false, got {follow!r}")
    client = client_of(request)
    job_id = job_id_in_path(request)
    attempt, run, offset = _position(request)
    if follow == "false":
        pieces = client.output(job_id, attempt=attempt, run=run, start=offset)
        return json_response(OutputPage([event async for event in pieces]))
    await client.get(job_id)  # JobNotFound as a problem, before the stream starts
    frames = _events(client, job_id, attempt, run, offset)
    stream = kept_alive(frames, KEEP_ALIVE_SECONDS, functools.partial(cut_short, request))
    return StreamingResponse(stream, media_type="text/event-stream", headers=_STREAM_HEADERS)


async def _events(
    client: AsyncClient, job_id: int, attempt: int | None, run: int | None, offset: int
) -> AsyncGenerator[bytes]:
    last_id = ""
    pieces = client.output(job_id, attempt=attempt, run=run, start=offset, follow=True)
    async for event in pieces:
        if not isinstance(event, AttemptEnded):
            last_id = event_id(event.attempt, event.run, event.end)
        kind = type(event).__struct_config__.tag
        data = msgspec.json.encode(event).decode()
        identity = f"id: {last_id}\n" if last_id else ""
        yield f"event: {kind}\n{identity}data: {data}\n\n".encode()


async def kept_alive(
    frames: AsyncGenerator[bytes],
    quiet_seconds: float,
    cut_short: Callable[[], Awaitable[errors.TaskqError | None]] | None = None,
) -> AsyncGenerator[bytes]:
    """``frames`` as they come, and a comment line each time none came for ``quiet_seconds``;
    ended early once ``cut_short()`` returns: cleanly for None (the server stops: the
    follower resumes by ``Last-Event-ID`` from the server that comes back, not from a stream
    cut off), after a ``problem`` event for a refusal (the follower's token revoked)."""
    # The next frame is awaited in a task of its own: waiting for it with a
    # timeout then never cancels the reader halfway through a page.
    pending: asyncio.Task[bytes] | None = None
    stop: asyncio.Future[errors.TaskqError | None] = (
        asyncio.get_running_loop().create_future()  # never done
        if cut_short is None
        else asyncio.ensure_future(cut_short())
    )
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(frames))
            waited: set[asyncio.Future[Any]] = {pending, stop}
            done, _ = await asyncio.wait(
                waited, timeout=quiet_seconds, return_when=asyncio.FIRST_COMPLETED
            )
            if pending not in done:
                if stop in done:
                    refusal = stop.result()
                    if refusal is not None:
                        yield problem_event(refusal)
                    return
                yield _KEEP_ALIVE
                continue
            try:
                frame = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield frame
    finally:
        # The follower went away (or the stream ended): stop reading for it.
        with anyio.CancelScope(shield=True):
            stop.cancel()
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.wait({pending})
            await frames.aclose()


# The query output() reads, for the document, with the bounds _position holds it to.
_PARAMS = (
    Param(
        "attempt",
        whole(1, _MOST_ATTEMPTS),
        "this attempt's output, of its latest run (by default the latest attempt's)",
    ),
    Param("offset", whole(0, bodies.MAX_ID), "from this byte of it (0 by default)"),
    Param(
        "follow",
        {"type": "boolean"},
        "true: Server-Sent Events (text/event-stream) as the job writes, until it ends",
    ),
)

ENDPOINTS = [
    Endpoint(
        "GET",
        "/jobs/{job_id}/output",
        output,
        "read",
        "A job's output (stdout, stderr, logging) from ?attempt= and ?offset=; with "
        "?follow=true, Server-Sent Events until the job ends (resumed by Last-Event-ID)",
        answer=OutputPage,
        named=(("job_id", JOB_ID),),
        params=_PARAMS,
        stream=True,
    ),
]
