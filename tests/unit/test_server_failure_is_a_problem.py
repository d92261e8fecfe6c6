"""A failure of the server's own (a bug: a 500) is a problem document like every error.

A client in another language reads every error as ``application/problem+json``;
a bare ``Internal Server Error`` in text was the one answer it could not.
"""

from __future__ import annotations

import asyncio

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from taskq.broker.client.client import AsyncClient
from taskq.server.app import create_app
from taskq.server.auth import Tokens


async def _fails(request: Request) -> Response:
    raise OverflowError("Python int too large to convert to SQLite INTEGER")


def _no_store() -> AsyncClient:
    raise AssertionError("the failing route reads no store")


async def _get(path: str) -> httpx.Response:
    # No lifespan (so no store): the route fails before it would read one.
    app = create_app(_no_store, Tokens([]))
    app.router.routes.append(Route(path, _fails))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.get(path)


def test_a_failure_of_the_server_is_answered_as_a_problem() -> None:
    answer = asyncio.run(_get("/fails"))
    assert (answer.status_code, answer.headers["content-type"]) == (
        500,
        "application/problem+json",
    )
    problem = answer.json()
    assert (problem["type"], problem["title"], problem["status"]) == (
        "about:blank",
        "Internal Server Error",
        500,
    )
    assert problem["detail"].startswith("GET /fails: the server failed")
    assert "SQLite" not in problem["detail"]  # the traceback is the log's, not the client's
