"""Where workers on a cluster listen for wake-up hints (see taskq/broker/wakeups.py)."""

from __future__ import annotations

import json
from typing import TypeAlias

from taskq.broker.ops import queries
from taskq.broker.ops.plan import Op, Read
from taskq.broker.stores.store import Consistency, Statement

WakeTarget: TypeAlias = tuple[tuple[str, int], frozenset[str]]
"""A worker's hint socket as (host, port), with the queues it serves."""


def worker_wake_targets() -> Op[list[WakeTarget]]:
    """The active workers' hint sockets, as any node's copy has them; bad rows are skipped."""
    rows = yield Read(Statement(queries.query("worker_wake_addresses")), Consistency.NONE)
    targets = []
    for row in rows:
        host, _, port = str(row["wake_address"]).rpartition(":")
        try:
            served = frozenset(str(queue) for queue in json.loads(row["queues"]))
            targets.append(((host.strip("[]"), int(port)), served))
        except (ValueError, TypeError):
            continue
    return targets
