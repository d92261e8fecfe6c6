"""The leader lease: one process at a time holds it and runs the maintenance services.

A lease is a ``leader`` row: a name, its holder and when it lapses, in store
time. :mod:`taskq.broker.ops.maintenance` takes, keeps and gives it up; a
worker's heartbeat (:func:`taskq.broker.ops.heartbeats.job_heartbeat`) keeps it
in its own write through a :class:`LeaderRenewal`. The SQL is in
``sql/queries/leader.sql``.
"""

from __future__ import annotations

import msgspec

from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.stores.store import Consistency, Statement


class LeaderRenewal(msgspec.Struct, frozen=True):
    """A leader lease for a worker's heartbeat to renew in its own write.

    See ``taskq.broker.ops.heartbeats.job_heartbeat``, which adds
    :meth:`elect_statement` to its batch.
    """

    name: str
    ttl_seconds: float

    def elect_statement(self, holder: str) -> Statement:
        """The statement that takes or keeps the lease for ``holder``; it returns the holder."""
        return _leader_elect(self.name, holder, self.ttl_seconds)


def _leader_elect(name: str, holder: str, ttl_seconds: float) -> Statement:
    return Statement(
        queries.query("leader_attempt_elect"),
        {"name": name, "holder": holder, "ttl_seconds": float(ttl_seconds)},
    )


def leader_attempt_elect(
    name: str, holder: str, *, ttl_seconds: float, now: float | None = None
) -> Op[bool]:
    """Take or keep the leader lease ``name``; True when ``holder`` holds it now."""
    results = yield Write(
        [clock_tick(now), _leader_elect(name, holder, ttl_seconds)], idempotent=True
    )
    return any(row["holder"] == holder for row in results[1].rows)


def leader_lease_open(name: str, holder: str, *, now: float | None = None) -> Op[bool]:
    """Whether ``holder`` could take the lease now (it is free, lapsed, or ours): a cheap read."""
    rows = yield Read(
        Statement(queries.query("leader_open"), {"name": name, "holder": holder, "now": now}),
        Consistency.NONE,
    )
    return bool(rows and rows[0]["open"])


def leader_resign(name: str, holder: str) -> Op[None]:
    """Give up the leader lease, so another process takes over at once."""
    yield Write(
        [Statement(queries.query("leader_resign"), {"name": name, "holder": holder})],
        idempotent=True,
    )
