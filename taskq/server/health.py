"""``/healthz`` (alive), ``/readyz`` (the store answers, a leader is known), ``/metrics``."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.server import metrics
from taskq.server.auth import Caller
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response


class Health(msgspec.Struct, frozen=True, omit_defaults=True):
    """``ok`` true when ready; ``detail`` says what is missing when not."""

    ok: bool
    detail: str = ""


async def healthz(request: Request, caller: Caller) -> Response:
    """Alive: answers without asking the store, so a store outage restarts no server."""
    return json_response(Health(True))


async def readyz(request: Request, caller: Caller) -> Response:
    """Ready when a reachable node of the store leads; else 503, so a balancer steers away."""
    try:
        nodes = await client_of(request).nodes()
    except errors.StoreError as exc:
        raise errors.StoreUnavailable(f"the store does not answer: {exc}") from exc
    if not any(node.leader and node.reachable for node in nodes):
        unreachable = [node.address for node in nodes if not node.reachable]
        detail = "no reachable node leads the store"
        if unreachable:
            detail += f" (unreachable: {', '.join(unreachable)})"
        raise errors.StoreUnavailable(detail)
    return json_response(Health(True))


async def scrape(request: Request, caller: Caller) -> Response:
    server_metrics: metrics.ServerMetrics = request.app.state.metrics
    seen = await metrics.snapshot(client_of(request))
    return Response(server_metrics.exposition(seen), media_type=metrics.CONTENT_TYPE)


ENDPOINTS = [
    Endpoint("GET", "/healthz", healthz, None, "This server is alive", answer=Health),
    Endpoint("GET", "/readyz", readyz, None, "The store answers and has a leader", answer=Health),
    Endpoint(
        "GET",
        "/metrics",
        scrape,
        "read",
        "Prometheus metrics (text format)",
        text=metrics.CONTENT_TYPE,
    ),
]
