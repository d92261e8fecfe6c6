"""One endpoint of the API, declared once: its route, the scope it needs, what it takes and gives.

The app's routes (:func:`routes_of`) and its OpenAPI document are both built
from the same :class:`Endpoint` list, so the two cannot disagree. :func:`guarded` wraps a
handler: it names the caller from the bearer token, checks the scope, and
turns the client's exceptions into problem details. A request held open (a
long poll, a followed stream) checks its token again as it waits
(:func:`cut_short`), so that one revoked meanwhile reads no further.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope as AsgiScope

from taskq import errors
from taskq.bounds import Text
from taskq.broker.client.client import AsyncClient
from taskq.config import Scope
from taskq.server import bodies, problems
from taskq.server.auth import Caller, TokenSource
from taskq.server.query import Param

# The caller of an endpoint that needs no token: it may do nothing else.
NOBODY = Caller("", frozenset())

TOKEN_RECHECK_SECONDS = 2.0
"""How often a request held open checks its token again: one revoked (or stripped of the
scope) meanwhile ends it within this, plus the server's look at its token file
(:data:`taskq.server.auth.RECHECK_SECONDS`)."""

T = TypeVar("T")

Handler = Callable[[Request, Caller], Awaitable[Response]]
RequestHandler = Callable[[Request], Awaitable[Response]]


class Endpoint(NamedTuple):
    """A route: ``scope`` None needs no token; ``body`` and ``answer`` describe it in OpenAPI.

    ``answer`` comes with ``status``, or with one of ``also`` (a status, and what it means).
    ``named``: the bounds the server holds a parameter of the path to, where it
    checks one (a name it writes, a job's id); any other is any text, and one that
    names nothing is a 404. ``params``: every parameter of the query (and header)
    the handler reads, for the document; one it does not read is refused.
    ``stream``: the answer may also be Server-Sent Events (``text/event-stream``).
    ``text``: the media type of an answer that is text, not JSON (``/metrics``).
    """

    method: str
    path: str
    handler: Handler
    scope: Scope | None
    summary: str
    body: Any = None
    answer: Any = None
    status: int = 200
    also: tuple[tuple[int, str], ...] = ()
    named: tuple[tuple[str, Text], ...] = ()
    params: tuple[Param, ...] = ()
    stream: bool = False
    text: str = ""


def client_of(request: Request) -> AsyncClient:
    """The app's one client over the store."""
    client: AsyncClient = request.app.state.client
    return client


def stopping_of(request: Request) -> asyncio.Event:
    """Set once the server starts to stop (:class:`taskq.server.run.StoppingServer`)."""
    stopping: asyncio.Event = request.app.state.stopping
    return stopping


async def cut_short(request: Request) -> errors.TaskqError | None:
    """Returns once ``request``, held open, must end before its time: None as the server
    starts to stop, else the refusal its token meets now (revoked, or its scope taken
    away), looked for every :data:`TOKEN_RECHECK_SECONDS`."""
    stopping = stopping_of(request)
    readmit: Callable[[], Caller] = getattr(request.state, "readmit", lambda: NOBODY)
    while True:
        try:
            await asyncio.wait_for(stopping.wait(), TOKEN_RECHECK_SECONDS)
        except TimeoutError:
            try:
                readmit()
            except (errors.Unauthorized, errors.Forbidden) as refusal:
                return refusal
        else:
            return None


async def unless_cut_short(request: Request, waited: Awaitable[T]) -> T | None:
    """What ``waited`` (a long poll's wait) gives, or None as soon as the server starts to
    stop, ``waited`` cancelled then: the request is answered as a wait that ran out, at once,
    where the stop's grace would end it in a bare 500 (the client asks again, of the server
    that comes back). A token refused meanwhile (:func:`cut_short`) cancels ``waited`` too,
    its refusal raised: the 401 or 403 the request would meet now."""
    wait = asyncio.ensure_future(waited)
    cut = asyncio.ensure_future(cut_short(request))
    try:
        await asyncio.wait({wait, cut}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # The request may be gone too (a client that hung up): neither outlives it.
        pending = {task for task in (wait, cut) if not task.done()}
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
    if not wait.cancelled():
        return wait.result()
    refusal = cut.result()
    if refusal is not None:
        raise refusal
    return None


def routes_of(endpoints: Sequence[Endpoint], tokens: TokenSource) -> list[Route]:
    """One route per path, taking every method declared at it.

    A method the path does not take is a 405 whose ``Allow`` names every
    method that it does (a route per endpoint would name only its own). The
    paths without a parameter come first, so that one (``/jobs/cancel``) is
    never read as a value of another's parameter (``/jobs/{job_id}``).
    """
    by_path: dict[str, dict[str, RequestHandler]] = {}
    for endpoint in endpoints:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = guarded(endpoint, tokens)
    paths = sorted(by_path, key=lambda path: "{" in path)
    return [
        _PathRoute(path, _by_method(by_path[path]), methods=list(by_path[path])) for path in paths
    ]


class _PathRoute(Route):
    """A route that answers every request to its path, a method it does not take with its
    405: Starlette's own would pass such a request on to a later route that matches it
    whole, so that ``GET /jobs/cancel`` would read the job "cancel" of ``/jobs/{job_id}``."""

    def matches(self, scope: AsgiScope) -> tuple[Match, AsgiScope]:
        match, child_scope = super().matches(scope)
        return (Match.FULL if match is Match.PARTIAL else match), child_scope


def _by_method(handlers: Mapping[str, RequestHandler]) -> RequestHandler:
    async def handle(request: Request) -> Response:
        # Starlette lets a HEAD through where GET is taken, and sends no body.
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return handle


def guarded(endpoint: Endpoint, tokens: TokenSource) -> RequestHandler:
    """``endpoint``'s handler behind its scope, answering taskq's errors as problems."""

    # Every route refuses a query parameter it does not read, as GET /jobs refuses a typo:
    # POST /jobs?wait=30 would else submit, and wait for nothing.
    reads = {param.name for param in endpoint.params if param.where == "query"}

    async def handle(request: Request) -> Response:
        caller = NOBODY
        try:
            if endpoint.scope is not None:
                readmit = functools.partial(
                    _admitted, tokens, request.headers.get("authorization"), endpoint.scope
                )
                caller = readmit()
                # For a request held open, to look again (cut_short).
                request.state.readmit = readmit
            bodies.only_known(request.query_params, reads)
            return await endpoint.handler(request, caller)
        except errors.TaskqError as exc:
            response = problems.problem_of(exc)
            if response is None:
                raise
            if isinstance(exc, errors.RateLimited):
                request.app.state.metrics.rate_limited(caller.name)
            return response

    return handle


def _admitted(tokens: TokenSource, authorization: str | None, scope: Scope) -> Caller:
    """The caller ``authorization`` names, if it holds ``scope``; else its refusal, raised."""
    caller = tokens.caller(authorization)
    caller.require(scope)
    return caller
