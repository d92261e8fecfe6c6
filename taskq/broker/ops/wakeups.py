"""Where workers on a cluster listen for wake-up hints (see taskq/broker/wakeups.py)."""

from __future__ import annotations

import json
from typing import TypeAlias

from taskq.broker.ops import queries
from taskq.broker.ops.plan import Op, Read
from taskq.broker.stores.store import Consistency, Statement

WakeTarget: TypeAlias = tuple[tuple[str, int], frozenset[str]]
"""A worker's hint socket as (host, port), with the queues it serves."""


def socket_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[host]:port`` for IPv6), as a worker registers it, for a socket.

    Raises ValueError when it is not one.
    """
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def worker_wake_targets() -> Op[list[WakeTarget]]:
    """The active workers' hint sockets, as any node's copy has them; bad rows are skipped."""
    rows = yield Read(Statement(queries.query("worker_wake_addresses")), Consistency.NONE)
    targets = []
    for row in rows:
        try:
            served = frozenset(str(queue) for queue in json.loads(row["queues"]))
            targets.append((socket_address(str(row["wake_address"])), served))
        except (ValueError, TypeError):
            continue
    return targets
