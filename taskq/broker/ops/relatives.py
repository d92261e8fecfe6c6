"""A job's relatives: how its parents ended (what ``current_job().parent_results()``
pages), and its parents, children, spawner and spawned jobs with their states."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from taskq.broker.ops import queries
from taskq.broker.ops.common import parent_result
from taskq.broker.ops.plan import Op, Read
from taskq.broker.records import MAX_RELATIVES, JobState, ParentResult, Relatives
from taskq.broker.stores.store import Consistency, Statement


def job_parent_results(
    job_id: int, *, after_position: int = -1, limit: int = 100
) -> Op[list[ParentResult]]:
    """One page of how the job's parents ended, in declared order, after ``after_position``."""
    rows = yield Read(
        Statement(
            queries.query("job_parent_results"),
            {
                "job_id": int(job_id),
                "after_position": int(after_position),
                "limit": max(1, min(int(limit), 10_000)),
            },
        ),
        Consistency.WEAK,
    )
    return [
        parent_result(row["position"], row["id"], row["state"], row["result"], row["error"])
        for row in rows
    ]


def job_relatives(job_id: int, *, limit: int = 100) -> Op[Relatives]:
    """The job's parents (declared order) and children (by id), at most ``limit`` of each;
    the job that spawned it and those it spawned (by id, at most ``limit``)."""
    rows = yield Read(
        Statement(
            queries.query("job_relatives"),
            {"job_id": int(job_id), "limit": relatives_limit(limit)},
        ),
        Consistency.WEAK,
    )
    ranked = sorted(rows, key=lambda row: int(row["rank"]))
    spawners = _sides(ranked, "spawner")
    return Relatives(
        parents=_sides(ranked, "parent"),
        children=_sides(ranked, "child"),
        spawned_by=spawners[0] if spawners else None,
        spawned=_sides(ranked, "spawned"),
    )


def relatives_limit(limit: int) -> int:
    """``limit`` brought within 1 to :data:`MAX_RELATIVES`, as a read of relatives takes it."""
    return max(1, min(int(limit), MAX_RELATIVES))


def _sides(rows: Sequence[Any], side: str) -> tuple[tuple[int, JobState], ...]:
    return tuple((int(row["id"]), JobState(row["state"])) for row in rows if row["side"] == side)
