"""Registered workers: joining, draining or leaving, the list of them, and which of them
may run a job another refused."""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec

from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import LIVE_SECONDS, ClaimedJob, PayloadKind, WorkerInfo
from taskq.broker.stores.store import Statement
from taskq.broker.worker_policy import Policy


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
    policy: Policy | None = None,
    now: float | None = None,
) -> Op[None]:
    """Record a worker as active (again, if it restarts under the same id).

    ``max_slots``: the most slots an autoscaling worker may grow to (its
    heartbeats keep ``slots`` current); None for a fixed number.
    ``wake_address``: where it hears wake-up hints
    (``taskq.broker.stores.wake_hints``), if anywhere.
    ``policy``: what it may run, for :func:`job_served_elsewhere` to read;
    None records none, as a worker of a taskq before policies did.
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
                    "policy": None if policy is None else msgspec.json.encode(policy).decode(),
                },
            ),
        ],
        idempotent=True,
    )


def worker_set_state(worker_id: str, state: str, *, now: float | None = None) -> Op[None]:
    """Mark a worker draining (no new claims) or stopped (deregistered).

    Nothing but a new registration brings a stopped worker back. A draining
    worker's heartbeats keep it draining, and it is live, as an active one
    is, until they stop; one marked lost that is heard again is draining again
    (its heartbeats say it drains). It serves no queue (it claims nothing), so
    :func:`job_served_elsewhere` passes it by.
    """
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
    """Every registered worker, each with its recorded policy (None when it recorded none,
    or one this taskq cannot read)."""
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
            policy=_policy(row["policy"]),
        )
        for row in rows
    ]


def job_served_elsewhere(job: ClaimedJob, *, worker_id: str) -> Op[bool]:
    """Whether a live worker other than ``worker_id`` could claim ``job`` and may run it.

    Live and active, taking jobs from the job's queue, with the labels it
    needs, and a policy that allows its payload: the rule the worker that
    claims it applies (:meth:`Policy.refusal`). A worker that recorded no
    policy (of an older taskq), or one this taskq cannot read, counts when it
    declares a ``call``'s target (``@taskq.job``), as before policies were
    recorded.
    """
    target = job.payload.get("target")
    if job.kind is not PayloadKind.CALL or not isinstance(target, str):
        target = None
    rows = yield Read(
        Statement(
            queries.query("worker_policies_for_job"),
            {
                "worker_id": worker_id,
                "job_id": job.lease.job_id,
                "queue": job.queue,
                "name": target,
                "live_seconds": LIVE_SECONDS,
            },
        )
    )
    for row in rows:
        policy = _policy(row["policy"])
        if policy is None:
            if row["declares"]:
                return True
        elif policy.refusal(job.kind, target) is None:
            return True
    return False


def _policy(stored: str | None) -> Policy | None:
    """A worker's recorded policy; None when it recorded none or one this taskq cannot read."""
    if stored is None:
        return None
    try:
        return msgspec.json.decode(stored, type=Policy)
    except msgspec.DecodeError:
        # A later taskq's, changed in a way this one cannot read: judged as one of before.
        return None
