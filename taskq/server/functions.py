"""``GET /functions``: the jobs workers have declared, as ``taskq functions --json`` lists them."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq.broker.client.client import DeclaredFunction
from taskq.server.auth import Caller
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response


class Functions(msgspec.Struct, frozen=True):
    """Every declared job by name: the version submits by name use, and its live workers."""

    functions: list[DeclaredFunction]


async def listing(request: Request, caller: Caller) -> Response:
    return json_response(Functions(await client_of(request).functions()))


ENDPOINTS = [
    Endpoint(
        "GET",
        "/functions",
        listing,
        "read",
        "The jobs workers declare: signatures, declared options, live workers",
        answer=Functions,
    ),
]
