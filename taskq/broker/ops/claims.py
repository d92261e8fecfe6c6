"""Claims: a worker takes jobs of its queues, each under a new lease, in one write.

A claim gives each job a lease token new for that claim, which fences every
later write about the job (see :mod:`taskq.broker.ops.leases`). Also the
cheap reads an idle or autoscaling worker makes to learn whether a claim
would find work.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import msgspec

from taskq import errors, fast_json
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import JOB_STATES, ClaimedJob, Lease, ParentResult, PayloadKind
from taskq.broker.stores.store import Consistency, Row, Statement

T = TypeVar("T")


class ClaimRequest(msgspec.Struct, frozen=True):
    """A worker asking for up to ``limit`` jobs of its queues, with its labels."""

    worker_id: str
    queues: tuple[str, ...]
    limit: int
    lease_seconds: float
    labels: tuple[str, ...] = ()
    with_parents: bool = True
    """Whether a job with parents comes with their first outcomes (``ClaimedJob.first_parents``).

    The clause that gathers them costs every claim on rqlite about 0.4 ms
    of each node's time, jobs with parents or not, since rqlite prepares
    every statement anew. Without it a job with parents comes with
    ``first_parents`` None, and whoever runs it reads them
    (``ops.relatives.job_parent_results``)."""


# The time in a claim (a write): the store's clock, as every write has it.
_STORE_NOW = "(SELECT now FROM taskq_clock)"
# The time in a read, which is not replicated: the answering node's own clock,
# 50 ms ahead for rqlite's rounding of a write's time (see job_claimable).
_NODE_NOW = "((julianday('now') - 2440587.5) * 86400.0 + 0.05)"


def _candidates_sql(queue_count: int, now: str) -> str:
    branch = queries.query("job_claim_candidates")
    return "\nUNION ALL\n".join(branch.format(n=index, now=now) for index in range(queue_count))


FIRST_PARENTS_COUNT = 64
"""At most how many parents' outcomes a claim hands over with a job (see ``first_parents``)."""
FIRST_PARENTS_BYTES = 256 * 1024
"""And at most how many bytes of their results and errors."""
_FIRST_PARENTS_PARAMS = {
    "first_parents_count": FIRST_PARENTS_COUNT,
    "first_parents_bytes": FIRST_PARENTS_BYTES,
}


def _first_parents_sql(with_parents: bool) -> str:
    """The claim's last returned column: the first parents' outcomes, or none asked for."""
    return queries.query("job_claim_first_parents") if with_parents else "NULL AS first_parents"


@functools.cache
def _claim_sql(queue_count: int, with_parents: bool) -> str:
    return queries.query("job_claim").format(
        candidates=_candidates_sql(queue_count, _STORE_NOW),
        first_parents=_first_parents_sql(with_parents),
    )


def _first_parents(text: str | None) -> tuple[ParentResult, ...] | None:
    """The parents' outcomes a claim returned with a job (None for a job without parents)."""
    if text is None:
        return None
    # The whole array in one decode: each parent's result and error decoded on
    # its own, and its state by ``JobState(...)``, took 150 us for 50 parents
    # (hot), against 31 us.
    return tuple(
        ParentResult(
            position=position, job_id=job_id, state=JOB_STATES[state], result=result, error=error
        )
        for position, job_id, state, result, error in fast_json.loads(text)
    )


def _claimed(row: Row) -> ClaimedJob:
    return ClaimedJob(
        lease=Lease(job_id=int(row["id"]), token=str(row["lease_token"])),
        kind=PayloadKind(row["kind"]),
        payload=from_json(row["payload"]),
        queue=str(row["queue"]),
        attempt=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        timeout=row["timeout"],
        limits=from_json(row["limits"]) or {},
        lease_until=float(row["lease_until"]),
        retry=from_json(row["retry"]),
        checkpoint_json=row["checkpoint"],
        parent_count=int(row["parent_count"]),
        has_children=bool(row["has_children"]),
        first_parents=_first_parents(row.get("first_parents")),
    )


def claim_statements(request: ClaimRequest, claim_token: str) -> list[Statement]:
    """The claim, its execution rows and its rate-limit spending: three statements."""
    queues = list(dict.fromkeys(request.queues))
    params: dict[str, Any] = {
        "worker_id": request.worker_id,
        "claim_token": claim_token,
        "lease_seconds": float(request.lease_seconds),
        "labels": json.dumps(sorted(set(request.labels))),
        "limit": int(request.limit),
    }
    if request.with_parents:
        params |= _FIRST_PARENTS_PARAMS
    params.update({f"queue_{index}": queue for index, queue in enumerate(queues)})
    token_params = {"worker_id": request.worker_id, "claim_token": claim_token}
    return [
        Statement(_claim_sql(len(queues), request.with_parents), params),
        Statement(queries.query("execution_start"), token_params),
        Statement(
            queries.query("queue_rate_spend"), {**token_params, "queues": json.dumps(queues)}
        ),
    ]


def claimed_rows(rows: list[Row]) -> list[ClaimedJob]:
    """The jobs a claim's rows name, in job id order."""
    return sorted((_claimed(row) for row in rows), key=lambda job: job.lease.job_id)


def claimed_by_token(request: ClaimRequest, claim_token: str) -> Op[list[ClaimedJob]]:
    """What a claim whose outcome is unknown did claim (nothing, if it was not applied)."""
    params: dict[str, Any] = {"worker_id": request.worker_id, "claim_token": claim_token}
    if request.with_parents:
        params |= _FIRST_PARENTS_PARAMS
    rows = yield Read(
        Statement(
            queries.query("job_claimed_by_token").format(
                first_parents=_first_parents_sql(request.with_parents)
            ),
            params,
        ),
        Consistency.LINEARIZABLE,
    )
    return claimed_rows(rows)


def job_claim(
    worker_id: str,
    queues: Sequence[str],
    *,
    limit: int,
    lease_seconds: float,
    labels: Sequence[str] = (),
    with_parents: bool = True,
    now: float | None = None,
) -> Op[list[ClaimedJob]]:
    """Claim up to ``limit`` runnable jobs of ``queues`` for one worker, in one request.

    Jobs come in claim order (priority, then run_at, then id), skip paused
    queues and jobs that need labels the worker lacks, get a lease token new
    for this claim, and get an execution row in the same batch. When the
    outcome is unknown, a linearizable read of this claim's token finds what
    was claimed, so no attempt is lost or doubled. ``with_parents``: as
    :attr:`ClaimRequest.with_parents`.
    """
    request = ClaimRequest(
        worker_id, tuple(queues), limit, lease_seconds, tuple(labels), with_parents
    )
    if request.limit < 1 or not request.queues:
        return []
    claim_token = os.urandom(8).hex()  # as secrets.token_hex, without its import
    try:
        results = yield Write([clock_tick(now), *claim_statements(request, claim_token)])
    except errors.OutcomeUnknown:
        return (yield from claimed_by_token(request, claim_token))
    return claimed_rows(results[1].rows)


def job_claimable(queues: Sequence[str], *, fresh: bool = False) -> Op[bool]:
    """Whether a claim on ``queues`` would find a job now: a cheap read for idle workers.

    Read at ``NONE`` consistency: any node answers from its own copy, and a
    stale answer costs at most one empty claim or one poll interval. A
    ``fresh`` read is the leader's copy (``WEAK``): for a look right after
    another worker's, whose claim a follower may not have applied yet.
    """
    rows = yield Read(
        Statement(queries.query("job_claimable"), {"queues": json.dumps(list(queues))}),
        Consistency.WEAK if fresh else Consistency.NONE,
    )
    return bool(rows and rows[0]["ready"])


def job_claimable_then(
    queues: Sequence[str],
    claim: Op[T],
    *,
    fresh: bool = False,
    gate: Callable[[], AbstractContextManager[bool]] | None = None,
) -> Op[T | None]:
    """``claim``, if :func:`job_claimable` (``fresh`` as there) finds a job now; else None.

    ``gate``, if given, is entered once the read found a job, and the claim
    is made inside it only if it gives True: the turn of a machine's idle
    workers (``stores.look_turns``), held while the claim is written.
    """
    if not (yield from job_claimable(queues, fresh=fresh)):
        return None
    if gate is None:
        return (yield from claim)
    with gate() as open_:
        return (yield from claim) if open_ else None


def job_backlog(queues: Sequence[str], labels: Sequence[str], *, limit: int) -> Op[int]:
    """How many jobs a claim on ``queues`` with ``labels`` would take now, counting to ``limit``.

    Due jobs of queues not paused, within each queue's ``max_running`` and
    rate limit: what an autoscaling worker grows for. A read at ``NONE``
    consistency, as ``job_claimable``: a stale count delays a step by one look.
    """
    names = list(dict.fromkeys(queues))
    if limit < 1 or not names:
        return 0
    params: dict[str, Any] = {
        "labels": json.dumps(sorted(set(labels))),
        "limit": int(limit),
        **{f"queue_{index}": queue for index, queue in enumerate(names)},
    }
    sql = queries.query("job_backlog").format(candidates=_candidates_sql(len(names), _NODE_NOW))
    rows = yield Read(Statement(sql, params), Consistency.NONE)
    return int(rows[0]["n"]) if rows else 0
