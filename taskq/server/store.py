"""The endpoints of the store itself: its schema's version, its nodes, its throughput, pruning."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client.client import KEEP, Keep, ThroughputBucket
from taskq.broker.records import Retention
from taskq.broker.stores.store import NodeInfo
from taskq.server import bodies
from taskq.server.auth import Caller
from taskq.server.endpoint import Endpoint, client_of
from taskq.server.problems import json_response
from taskq.server.query import Param, seconds, whole

# A week, a bucket a minute: the answer's length is the window's, so a window has an end.
MAX_THROUGHPUT_MINUTES = 7 * 24 * 60


class SchemaVersion(msgspec.Struct, frozen=True):
    """The newest schema migration the store has (0: none)."""

    schema_version: int


class Nodes(msgspec.Struct, frozen=True):
    """The store's members as the server sees them: address, role, reachable or not."""

    nodes: list[NodeInfo]


class Throughput(msgspec.Struct, frozen=True):
    """Finished attempts per minute by outcome, oldest minute first (0: the current one)."""

    throughput: list[ThroughputBucket]


class Pruned(msgspec.Struct, frozen=True):
    """How many finished jobs were deleted."""

    pruned: int


async def schema_version(request: Request, caller: Caller) -> Response:
    return json_response(SchemaVersion(await client_of(request).schema_version()))


async def nodes(request: Request, caller: Caller) -> Response:
    return json_response(Nodes(await client_of(request).nodes()))


_MINUTES = Param(
    "minutes", whole(1, MAX_THROUGHPUT_MINUTES), "this many minutes back (15 by default)"
)
_NOW = Param(
    "now", seconds(job_validation.MAX_RUN_AT), "from this unix time (by default the store's)"
)


async def throughput(request: Request, caller: Caller) -> Response:
    """``minutes`` back (15 by default) from ``now`` (a unix time; by default the store's)."""
    params = request.query_params
    bodies.only_known(params, {_MINUTES.name, _NOW.name})
    minutes = (
        bodies.integer(params, "minutes", low=1, high=MAX_THROUGHPUT_MINUTES)
        if "minutes" in params
        else 15
    )
    now = (
        bodies.number(params, "now", default=0.0, high=job_validation.MAX_RUN_AT)
        if "now" in params
        else None
    )
    buckets = await client_of(request).throughput(minutes=minutes, now=now)
    return json_response(Throughput(buckets))


async def prune(request: Request, caller: Caller) -> Response:
    """Delete the jobs that finished long enough ago, batch after batch."""
    sent = bodies.decoded(
        await bodies.read_body(request), bodies.PruneRequest, refused=errors.InvalidSetting
    )
    return json_response(Pruned(await client_of(request).prune(older_than=sent.older_than)))


async def retention(request: Request, caller: Caller) -> Response:
    """How long the store keeps finished jobs."""
    return json_response(await client_of(request).retention())


async def set_retention(request: Request, caller: Caller) -> Response:
    """Set how long the store keeps finished jobs; the retention now."""
    change = bodies.decoded(
        await bodies.read_body(request), bodies.RetentionPatch, refused=errors.InvalidSetting
    )
    kept = await client_of(request).set_retention(
        succeeded=_kept(change.succeeded_seconds), failed=_kept(change.failed_seconds)
    )
    return json_response(kept)


def _kept(sent: float | msgspec.UnsetType | None) -> float | Keep | None:
    return KEEP if sent is msgspec.UNSET else sent


ENDPOINTS = [
    Endpoint(
        "GET",
        "/store/schema-version",
        schema_version,
        "read",
        "The store's schema version",
        answer=SchemaVersion,
    ),
    Endpoint("GET", "/store/nodes", nodes, "read", "The store's nodes", answer=Nodes),
    Endpoint(
        "GET",
        "/store/throughput",
        throughput,
        "read",
        "Finished attempts per minute",
        answer=Throughput,
        params=(_MINUTES, _NOW),
    ),
    Endpoint(
        "POST",
        "/store/prune",
        prune,
        "admin",
        "Delete the jobs that finished long ago",
        body=bodies.PruneRequest,
        answer=Pruned,
    ),
    Endpoint(
        "GET",
        "/store/retention",
        retention,
        "read",
        "How long finished jobs are kept",
        answer=Retention,
    ),
    Endpoint(
        "PATCH",
        "/store/retention",
        set_retention,
        "admin",
        "Set how long finished jobs are kept",
        body=bodies.RetentionPatch,
        answer=Retention,
    ),
]
