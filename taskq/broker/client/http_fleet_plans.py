"""How the requests about queues, workers, submitters and the store map to ``taskq serve``.

As :mod:`.http_plans` does for jobs, workflows and schedules: each function
takes the parameters of the request it maps (declared in
:mod:`.fleet_operations` with ``over_http(...)``) and returns its plan, whose
answer is the record a client on the store returns.
"""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import quote

import msgspec

from taskq import errors
from taskq.broker.client.http_requests import HttpPlan, HttpRequest, decoded, decoded_member
from taskq.broker.ops import retention
from taskq.broker.ops.functions import DeclaredFunction
from taskq.broker.ops.jobs import ThroughputBucket
from taskq.broker.ops.queues import Keep, SubmitLimit
from taskq.broker.records import QueueStats, Retention, WorkerInfo
from taskq.broker.stores.store import NodeInfo

# -- queues and workers ------------------------------------------------------------------


def _queue_patch(queue: str, change: dict[str, Any], what: str) -> HttpPlan[None]:
    """PATCH /queues/{name}: ``what`` the change does (``"pause it"``), for its refusal."""
    body = msgspec.json.encode(change)
    try:
        yield HttpRequest("PATCH", f"/queues/{quote(queue, safe='')}", body=body)
    except errors.QueueNotFound:
        # The server's words name its body's member; here it is the argument.
        raise errors.QueueNotFound.not_created(queue, what, "create=True") from None


def queue_pause(queue: str, *, create: bool = False) -> HttpPlan[None]:
    return _queue_patch(queue, {"paused": True, "create": create}, "pause it")


def queue_resume(queue: str, *, create: bool = False) -> HttpPlan[None]:
    return _queue_patch(queue, {"paused": False, "create": create}, "resume it")


def queue_set_limits(
    queue: str,
    *,
    max_running: int | Keep | None = Keep.KEEP,
    rate_limit: float | Keep | None = Keep.KEEP,
    rate_period: float = 1.0,
    create: bool = False,
) -> HttpPlan[None]:
    """PATCH /queues/{name} with the limits given (null lifts one; one left out stays)."""
    change: dict[str, Any] = {"rate_period": rate_period, "create": create}
    for member, value in (("max_running", max_running), ("rate_limit", rate_limit)):
        if not isinstance(value, Keep):
            change[member] = value
    return _queue_patch(queue, change, "set its limits")


def queue_stats() -> HttpPlan[builtins.list[QueueStats]]:
    answer = yield HttpRequest("GET", "/queues")
    return list(decoded_member(answer, "queues", builtins.list[QueueStats]))


def worker_list() -> HttpPlan[builtins.list[WorkerInfo]]:
    answer = yield HttpRequest("GET", "/workers")
    return list(decoded_member(answer, "workers", builtins.list[WorkerInfo]))


def queue_served_list() -> HttpPlan[set[str]]:
    """GET /queues: the queues the server's store counts as served by a live worker."""
    answer = yield HttpRequest("GET", "/queues")
    return set(decoded_member(answer, "served", builtins.list[str]))


def function_list() -> HttpPlan[builtins.list[DeclaredFunction]]:
    answer = yield HttpRequest("GET", "/functions")
    return list(decoded_member(answer, "functions", builtins.list[DeclaredFunction]))


# -- submitters ----------------------------------------------------------------------------


def submit_limit_set(submitter: str, rate: float, period: float) -> HttpPlan[None]:
    """PUT /submit-limits/{submitter}."""
    body = msgspec.json.encode({"rate": rate, "period": period})
    yield HttpRequest("PUT", f"/submit-limits/{quote(submitter, safe='')}", body=body)


def submit_limit_remove(submitter: str) -> HttpPlan[None]:
    """DELETE /submit-limits/{submitter} (answered alike whether it had a limit or not)."""
    yield HttpRequest("DELETE", f"/submit-limits/{quote(submitter, safe='')}")


def submit_limit_list() -> HttpPlan[builtins.list[SubmitLimit]]:
    answer = yield HttpRequest("GET", "/submit-limits")
    return list(decoded_member(answer, "submit_limits", builtins.list[SubmitLimit]))


# -- the store -----------------------------------------------------------------------------


def store_schema_version() -> HttpPlan[int]:
    answer = yield HttpRequest("GET", "/store/schema-version")
    return int(decoded_member(answer, "schema_version", int))


def store_nodes() -> HttpPlan[builtins.list[NodeInfo]]:
    """GET /store/nodes: the nodes as the server sees them."""
    answer = yield HttpRequest("GET", "/store/nodes")
    return list(decoded_member(answer, "nodes", builtins.list[NodeInfo]))


def store_throughput(
    *, minutes: int = 15, now: float | None = None
) -> HttpPlan[builtins.list[ThroughputBucket]]:
    """GET /store/throughput?minutes=&now= (now left out: the store's clock)."""
    params: dict[str, int | float] = {"minutes": minutes}
    if now is not None:
        params["now"] = now
    answer = yield HttpRequest("GET", "/store/throughput", params)
    return list(decoded_member(answer, "throughput", builtins.list[ThroughputBucket]))


def retention_get() -> HttpPlan[Retention]:
    """GET /store/retention."""
    answer = yield HttpRequest("GET", "/store/retention")
    return decoded(answer, Retention)


def retention_set(
    *, succeeded: float | Keep | None = Keep.KEEP, failed: float | Keep | None = Keep.KEEP
) -> HttpPlan[Retention]:
    """PATCH /store/retention with the figures given (null: kept until pruned by hand),
    checked first: a refusal reads as a client on the store words it."""
    change = {
        f"{name}_seconds": retention.checked(name, value)
        for name, value in (("succeeded", succeeded), ("failed", failed))
        if not isinstance(value, Keep)
    }
    answer = yield HttpRequest("PATCH", "/store/retention", body=msgspec.json.encode(change))
    return decoded(answer, Retention)


def store_prune(*, older_than: float | None = None) -> HttpPlan[int]:
    """POST /store/prune: how many finished jobs went."""
    body = msgspec.json.encode({} if older_than is None else {"older_than": older_than})
    answer = yield HttpRequest("POST", "/store/prune", body=body)
    return int(decoded_member(answer, "pruned", int))
