"""Registered workers: joining, draining or leaving, and the list of them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import WorkerInfo
from taskq.broker.stores.store import Statement


def worker_register(
    worker_id: str,
    *,
    name: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    labels: Sequence[str],
    slots: int,
    max_slots: int | None = None,
    wake_address: str | None = None,
    now: float | None = None,
) -> Op[None]:
    """Record a worker as active (again, if it restarts under the same id).

    ``max_slots``: the most slots an autoscaling worker may grow to (its
    heartbeats keep ``slots`` current); None for a fixed number.
    ``wake_address``: where it hears wake-up hints
    (``taskq.broker.stores.wake_hints``), if anywhere.
    """
    yield Write(
        [
            clock_tick(now),
            Statement(
                queries.query("worker_register"),
                {
                    "worker_id": worker_id,
                    "name": name,
                    "host": host,
                    "pid": int(pid),
                    "queues": json.dumps(list(queues)),
                    "labels": json.dumps(sorted(set(labels))),
                    "slots": int(slots),
                    "max_slots": None if max_slots is None else int(max_slots),
                    "wake_address": wake_address,
                },
            ),
        ],
        idempotent=True,
    )


def worker_set_state(worker_id: str, state: str, *, now: float | None = None) -> Op[None]:
    """Mark a worker draining (no new claims) or stopped (deregistered)."""
    if state not in {"active", "draining", "stopped"}:
        raise ValueError(f"a worker cannot set itself {state!r}")
    yield Write(
        [
            clock_tick(now),
            Statement(queries.query("worker_set_state"), {"worker_id": worker_id, "state": state}),
        ],
        idempotent=True,
    )


def worker_list() -> Op[list[WorkerInfo]]:
    """Every registered worker."""
    rows = yield Read(Statement(queries.query("worker_list")))
    return [
        WorkerInfo(
            id=row["id"],
            name=row["name"],
            host=row["host"],
            pid=int(row["pid"]),
            queues=tuple(from_json(row["queues"])),
            labels=tuple(from_json(row["labels"])),
            slots=int(row["slots"]),
            max_slots=None if row["max_slots"] is None else int(row["max_slots"]),
            running=int(row["running"]),
            state=row["state"],
            started_at=float(row["started_at"]),
            heartbeat_at=float(row["heartbeat_at"]),
        )
        for row in rows
    ]
