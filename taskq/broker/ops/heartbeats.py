"""Work under a lease, while the job runs: heartbeats and progress.

Each write is fenced by the job's lease token (see :mod:`taskq.broker.ops.leases`,
which takes the reports of finished attempts): a worker whose lease moved on
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec

from taskq import errors
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.leader import LeaderRenewal
from taskq.broker.ops.plan import Op, Write
from taskq.broker.records import Fenced, Lease
from taskq.broker.stores.store import Statement


class HeartbeatResult(msgspec.Struct, frozen=True):
    """Which of a worker's leases were extended, and which are gone."""

    kept: frozenset[Lease]
    lost: frozenset[Lease]
    leader_held: bool | None = None
    """With a leader lease to renew: whether the worker holds it after the heartbeat."""
    cancelled: frozenset[Lease] = frozenset()
    """Of the lost leases, those whose jobs a cancel was requested for (the rest expired)."""


def job_heartbeat(
    worker_id: str,
    leases: Sequence[Lease],
    *,
    lease_seconds: float,
    busy: int | None = None,
    slots: int | None = None,
    draining: bool = False,
    renew: LeaderRenewal | None = None,
    now: float | None = None,
) -> Op[HeartbeatResult]:
    """Extend every lease the worker still holds, in one statement; report the lost ones.

    A lease is lost when its job was requeued after expiry (the token changed)
    or a cancel was requested: the worker must stop that job. ``busy`` is how
    many of these jobs are in the worker's slots now (by default all of them):
    the rest were claimed ahead and wait for a slot. ``renew`` also keeps (or
    takes) a leader lease for the worker in the same write, so that leading
    costs an idle worker no writes beyond its heartbeats. ``slots``, when
    given, is how many slots the worker has now (an autoscaling one changes).
    ``draining``: whether the worker drains; one that maintenance marked lost
    meanwhile (which overwrites its draining state) comes back draining, not active.
    """
    tokens = json.dumps([lease.token for lease in leases])
    batch = [
        clock_tick(now),
        Statement(
            queries.query("job_heartbeat"),
            {"worker_id": worker_id, "tokens": tokens, "lease_seconds": float(lease_seconds)},
        ),
        Statement(
            queries.query("worker_heartbeat"),
            {
                "worker_id": worker_id,
                "running": len(leases) if busy is None else busy,
                "slots": slots,
                "draining": int(draining),
            },
        ),
    ]
    if renew is not None:
        batch.append(renew.elect_statement(worker_id))
    results = yield Write(batch, idempotent=True)
    renewed = {str(row["lease_token"]): not row["cancel_requested"] for row in results[1].rows}
    kept = frozenset(lease for lease in leases if renewed.get(lease.token))
    cancelled = frozenset(lease for lease in leases if renewed.get(lease.token) is False)
    leader_held = None
    if renew is not None:
        leader_held = any(row["holder"] == worker_id for row in results[3].rows)
    return HeartbeatResult(
        kept=kept, lost=frozenset(leases) - kept, leader_held=leader_held, cancelled=cancelled
    )


# How much of a progress message is stored (a report's last progress too: leases.py).
MAX_PROGRESS_MESSAGE = 500


def job_progress(
    lease: Lease, progress: float, message: str = "", *, checkpoint_json: str | None = None
) -> Op[Fenced]:
    """Record how far a running job got (0..1) and a short message.

    ``checkpoint_json``: what the job saved to resume from (JSON text), kept
    with the job for its next attempt; None leaves the saved one as it is.
    """
    if not 0.0 <= progress <= 1.0:
        raise errors.InvalidJob(f"progress must be between 0 and 1, got {progress}")
    statement = Statement(
        queries.query("job_progress"),
        {
            "job_id": lease.job_id,
            "lease_token": lease.token,
            "progress": float(progress),
            "message": message[:MAX_PROGRESS_MESSAGE],
            "checkpoint": checkpoint_json,
        },
    )
    results = yield Write([statement], idempotent=True)
    return Fenced.ACCEPTED if results[0].rows else Fenced.LEASE_LOST
