"""The ASGI application: the endpoints over one ``AsyncClient``, opened and closed with the app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from taskq.broker.client.client import AsyncClient
from taskq.server import (
    fleet,
    functions,
    health,
    jobs,
    output,
    schedules,
    store,
    workflows,
)
from taskq.server.auth import TokenSource
from taskq.server.endpoint import Endpoint, routes_of
from taskq.server.metrics import ServerMetrics
from taskq.server.openapi import document
from taskq.server.problems import http_problem, json_response, server_error

ENDPOINTS: list[Endpoint] = [
    *jobs.ENDPOINTS,
    *output.ENDPOINTS,
    *workflows.ENDPOINTS,
    *fleet.ENDPOINTS,
    *schedules.ENDPOINTS,
    *store.ENDPOINTS,
    *functions.ENDPOINTS,
    *health.ENDPOINTS,
]


def create_app(
    open_client: Callable[[], AsyncClient],
    tokens: TokenSource,
    stopping: asyncio.Event | None = None,
) -> Starlette:
    """The API over the client ``open_client`` makes when the app starts (closed at its end).

    ``stopping``: set as the server starts to stop; its long polls answer then, and its
    followed streams end (None: an event of the app's own, never set).
    """
    schema = document(ENDPOINTS, bearer=not tokens.open)

    async def openapi(request: Request) -> Response:
        return json_response(schema)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.client = open_client()
        app.state.metrics = ServerMetrics()
        # Made on the app's own event loop when none is given: each test client has its own.
        app.state.stopping = asyncio.Event() if stopping is None else stopping
        try:
            yield
        finally:
            await app.state.client.aclose()

    routes = routes_of(ENDPOINTS, tokens)
    routes.append(Route("/openapi.json", openapi, methods=["GET"]))
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        # Exception: Starlette's last resort, still logged, answered as a problem document.
        exception_handlers={HTTPException: http_problem, Exception: server_error},
    )
