"""Jobs and their attempts: reads, and cancel and retry by hand (waits: :mod:`.job_waits`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.ops import dependencies, output, queries
from taskq.broker.ops.common import KEYSET_START, clock_tick, from_json, ids_param
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import Execution, Job, JobState, PayloadKind
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement

# Kept in a leaf the command line reads too (it may not import the operations);
# .job_waits names it from here.

# -- by hand ----------------------------------------------------------------------


class CancelResult(msgspec.Struct, frozen=True):
    """Jobs cancelled at once (they were queued) and jobs asked to stop (running)."""

    cancelled: tuple[int, ...]
    requested: tuple[int, ...]


def job_cancel(ids: Sequence[int], *, now: float | None = None) -> Op[CancelResult]:
    """Cancel queued and waiting jobs now; ask running ones to stop at their next heartbeat.

    The jobs waiting on those cancelled now end cancelled too, in the same
    write, unless they run anyway (then they run once their parents ended).
    """
    return (
        yield from cancel_chosen(
            queries.query("job_cancel_chosen_ids"), {"ids": ids_param(ids)}, now
        )
    )


def cancel_chosen(chosen: str, params: dict[str, SqlValue], now: float | None) -> Op[CancelResult]:
    """:func:`job_cancel` of the jobs that the SQL condition ``chosen`` names, with ``params``."""
    results = yield Write(
        [
            clock_tick(now),
            Statement(queries.query("job_cancel_queued").format(chosen=chosen), params),
            Statement(queries.query("job_cancel_running").format(chosen=chosen), params),
            *dependencies.settle_statements(),
        ],
        idempotent=True,
    )
    return CancelResult(
        cancelled=tuple(sorted(int(row["id"]) for row in results[1].rows)),
        requested=tuple(sorted(int(row["id"]) for row in results[2].rows)),
    )


def job_retry(
    ids: Sequence[int], *, now: float | None = None, refuse_recancelled: bool = False
) -> Op[list[int]]:
    """:func:`job_retry_reviving`, the ids of the jobs retried."""
    retried, _ = yield from job_retry_reviving(ids, now=now, refuse_recancelled=refuse_recancelled)
    return retried


def job_retry_reviving(
    ids: Sequence[int], *, now: float | None = None, refuse_recancelled: bool = False
) -> Op[tuple[list[int], list[int]]]:
    """Queue failed, dead or cancelled jobs again now; return the ids that moved: those
    retried, and those brought back (the jobs their ends cancelled, which wait again).

    A job with parents waits for them again instead (queued at once if they
    all ended, cancelled again if one still ended failed), and the jobs that
    its end cancelled wait again, with theirs.

    ``refuse_recancelled``: a retry by hand of a job that would be cancelled
    again at once (a parent of it ended failed, dead or cancelled, and the
    retry does not bring that parent back) is refused with
    :class:`taskq.errors.WrongState` naming the parent, and nothing moves. A
    retry of a whole workflow takes what comes back and leaves the rest.
    """
    guard = [Statement(queries.query("job_retry_guard"), {"ids": ids_param(ids)})]
    statements = [
        clock_tick(now),
        Statement(queries.query("job_retry"), {"ids": ids_param(ids)}),
        *dependencies.revive_statements(ids),
        *dependencies.settle_statements(),
        *(guard if refuse_recancelled else []),
    ]
    try:
        results = yield Write(statements, idempotent=True)
    except errors.ConstraintViolation as exc:
        if not refuse_recancelled or exc.index != len(statements) - 1:
            raise
        raise (yield from _recancelled(ids)) from None
    retried = sorted(int(row["id"]) for row in results[1].rows)
    return retried, sorted(int(row["id"]) for row in results[2].rows)


def _recancelled(ids: Sequence[int]) -> Op[errors.WrongState]:
    """Why a retry by hand of ``ids`` was refused: the first job of them, in order, that
    waits for a parent that ended without succeeding and is not retried with it."""
    rows = yield Read(
        Statement(queries.query("job_retry_blocker"), {"ids": ids_param(ids)}), Consistency.WEAK
    )
    if not rows:  # moved on since the write: as the write found it, in general terms
        return errors.WrongState(
            "not retried: a job of them would be cancelled again at once, as a parent of it "
            "ended without succeeding; retry the parent where the failure began"
        )
    row = rows[0]
    parent = f"job {row['parent_id']}, which ended {row['parent_state']}"
    cause = row["cause"]
    if cause is not None and int(cause) != int(row["parent_id"]):
        parent += f" (as job {cause} ended {row['cause_state']})"
        start = int(cause)
    else:
        start = int(row["parent_id"])
    return errors.WrongState(
        f"job {row['id']} not retried: it waits for {parent}, so it would be cancelled "
        f"again at once; retry job {start}, which brings back the jobs its end cancelled"
        + (
            f", or retry workflow {row['workflow_id']} whole"
            if row["workflow_id"] is not None
            else ""
        )
    )


# -- reads ------------------------------------------------------------------------


def job_check_ids(ids: Sequence[int]) -> Op[None]:
    """:class:`taskq.errors.JobNotFound` for the first of ``ids`` that no job has.

    Cancel and retry by hand read this before they write, so a mistyped id
    among several moves none of them rather than passing unnoticed.
    """
    rows = yield Read(
        Statement(queries.query("job_first_unknown"), {"ids": ids_param(ids)}), Consistency.WEAK
    )
    if rows:
        raise errors.JobNotFound(f"no job with id {ids[int(rows[0]['position'])]}")


def _job(row: Row) -> Job:
    return Job(
        id=int(row["id"]),
        queue=row["queue"],
        kind=PayloadKind(row["kind"]),
        payload=from_json(row["payload"]),
        state=JobState(row["state"]),
        priority=int(row["priority"]),
        run_at=float(row["run_at"]),
        attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        timeout=row["timeout"],
        limits=from_json(row["limits"]) or {},
        labels=tuple(from_json(row["labels"]) or ()),
        idempotency_key=row["idempotency_key"],
        submitter=row["submitter"],
        created_at=float(row["created_at"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        worker_id=row["worker_id"],
        lease_until=row["lease_until"],
        cancel_requested=bool(row["cancel_requested"]),
        progress=row["progress"],
        progress_message=row["progress_message"],
        result=from_json(row["result"]),
        error=from_json(row["error"]),
        retry=from_json(row["retry"]),
        checkpoint=from_json(row["checkpoint"]),
        claimed_at=row["claimed_at"],
        workflow_id=row["workflow_id"],
        run_anyway=bool(row["run_anyway"]),
        parents_left=int(row["parents_left"]),
    )


def job_get(job_id: int, *, consistency: Consistency = Consistency.WEAK) -> Op[Job | None]:
    """One job, or None when no job has that id."""
    rows = yield Read(Statement(queries.query("job_get"), {"id": int(job_id)}), consistency)
    return _job(rows[0]) if rows else None


def job_list(
    *,
    state: JobState | str | None = None,
    queue: str | None = None,
    worker_id: str | None = None,
    submitter: str | None = None,
    text: str | None = None,
    workflow_id: int | None = None,
    before: int | None = None,
    limit: int = 50,
) -> Op[list[Job]]:
    """Jobs newest first, filtered; pass the last id seen as ``before`` for the next page.

    ``state`` is a JobState or its name; ``text`` matches a queue name
    exactly or any part of the payload; ``workflow_id`` keeps one workflow's jobs;
    ``limit`` is 1 to 1000 (:class:`taskq.errors.InvalidJob` otherwise).
    """
    job_validation.check_page_limit(limit)
    if state is not None:
        state = job_validation.parse_job_state(state)
    params: dict[str, Any] = {
        "text": text or None,
        "state": state.value if state else None,
        "queue": queue,
        "submitter": submitter,
        "worker_id": worker_id,
        "workflow_id": workflow_id,
        "before": int(before) if before is not None else KEYSET_START,
        "limit": limit,
    }
    # Each query leads with the filter its index serves; the rest are residual.
    if workflow_id is not None:
        name = "job_list_by_workflow"
    elif worker_id is not None:
        name = "job_list_by_worker"
    elif state is JobState.RUNNING:
        name = "job_list_running"
    elif state is JobState.SUCCEEDED:
        name = "job_list_succeeded"
    elif state is not None:
        name = "job_list_by_state"
    elif submitter is not None:
        name = "job_list_by_submitter"
    else:
        name = "job_list"
    sql = queries.query(name)
    used = {key: value for key, value in params.items() if f":{key}" in sql}
    rows = yield Read(Statement(sql, used))
    return [_job(row) for row in rows]


# -- attempts ---------------------------------------------------------------------


def _execution(row: Row) -> Execution:
    return Execution(
        id=int(row["id"]),
        job_id=int(row["job_id"]),
        attempt=int(row["attempt"]),
        worker_id=row["worker_id"],
        started_at=float(row["started_at"]),
        finished_at=row["finished_at"],
        outcome=row["outcome"],
        exit_code=row["exit_code"],
        signal=row["signal"],
        peak_rss_bytes=row["peak_rss_bytes"],
        cpu_seconds=row["cpu_seconds"],
        log_tail=_log_tail(row),
        error=from_json(row["error"]),
        claimed_at=row["claimed_at"],
        output_bytes=int(row["output_bytes"]),
    )


def _log_tail(row: Row) -> str | None:
    """The end of the attempt's stored output; an attempt from before live output has its
    reported tail instead."""
    tail = row["output_tail"]
    if not tail:
        reported: str | None = row["log_tail"]
        return reported
    # The first chunk may begin before the tail does: cut there, mid-character or not.
    return str(tail).encode()[-output.ATTEMPT_TAIL_BYTES :].decode(errors="replace")


def execution_list(*, job_id: int) -> Op[list[Execution]]:
    """The attempts of one job, oldest first."""
    rows = yield _executions_read("execution_list_by_job", {"job_id": int(job_id)})
    return [_execution(row) for row in rows]


def execution_list_by_worker(
    worker_id: str, *, before: int | None = None, limit: int = 50
) -> Op[list[Execution]]:
    """The attempts of one worker, newest first, a page of ``limit`` before id ``before``.

    A worker id that no worker registered with and no attempt names raises
    :class:`taskq.errors.WorkerNotFound`; a pruned worker's attempts are still listed.
    """
    params: dict[str, SqlValue] = {
        "worker_id": worker_id,
        "before": int(before) if before is not None else KEYSET_START,
        "limit": max(1, min(int(limit), 1000)),
    }
    rows = yield _executions_read("execution_list_by_worker", params)
    if not rows:
        raise errors.WorkerNotFound(f"no worker with id {worker_id!r}")
    # A known worker with no attempt on this page answers one row with no attempt in it.
    return [_execution(row) for row in rows if row["id"] is not None]


def _executions_read(name: str, params: dict[str, SqlValue]) -> Read:
    """The read of query ``name`` of attempts, each with the tail of its output."""
    tail: dict[str, SqlValue] = {
        "tail_bytes": output.ATTEMPT_TAIL_BYTES,
        "most_chunk_bytes": output.MOST_CHUNK_BYTES,
    }
    sql = queries.query(name).format(output_tail=queries.query("execution_output_tail"))
    return Read(Statement(sql, {**params, **tail}))


class ThroughputBucket(msgspec.Struct, frozen=True):
    """Attempts that finished in one minute, by outcome (0 = the current minute)."""

    minutes_ago: int
    outcomes: dict[str, int]


def execution_throughput(
    *, minutes: int = 15, now: float | None = None
) -> Op[list[ThroughputBucket]]:
    """Finished attempts per minute over the last ``minutes``, oldest first, gaps as zeros."""
    rows = yield Read(
        Statement(queries.query("execution_throughput"), {"minutes": int(minutes), "now": now}),
        Consistency.NONE,
    )
    buckets = {ago: ThroughputBucket(ago, {}) for ago in range(minutes)}
    for row in rows:
        ago = int(row["minutes_ago"])
        if ago in buckets:
            outcomes = buckets[ago].outcomes
            outcomes[row["outcome"] or "?"] = outcomes.get(row["outcome"] or "?", 0) + int(row["n"])
    return [buckets[ago] for ago in sorted(buckets, reverse=True)]


# The upper bounds, in seconds, of the buckets of execution_seconds_histogram
# (its CASE lists them again); past the last is +Inf.
ATTEMPT_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0)


class Histogram(msgspec.Struct, frozen=True):
    """Counts per bucket (upper bound in seconds, None for +Inf), their total and sum."""

    buckets: dict[float | None, int]
    count: int
    sum: float


class ExecutionStats(msgspec.Struct, frozen=True):
    """The store's totals: finished attempts' run time by outcome, and jobs' pickup latency."""

    run_seconds: dict[str, Histogram]
    pickup_seconds: Histogram


def _histogram(rows: list[Row]) -> Histogram:
    buckets: dict[float | None, int] = {bound: 0 for bound in ATTEMPT_SECONDS_BUCKETS}
    buckets[None] = 0
    for row in rows:
        buckets[row["bucket"]] += int(row["n"])
    return Histogram(
        buckets=buckets,
        count=sum(buckets.values()),
        sum=sum(float(row["seconds"] or 0) for row in rows),
    )


def execution_stats() -> Op[ExecutionStats]:
    """Every finished attempt's run time by outcome, and every started job's pickup latency."""
    rows = yield Read(Statement(queries.query("execution_seconds_histogram")))
    by_outcome: dict[str, list[Row]] = {}
    pickups: list[Row] = []
    for row in rows:
        if row["kind"] == "pickup":
            pickups.append(row)
        else:
            by_outcome.setdefault(row["outcome"], []).append(row)
    return ExecutionStats(
        run_seconds={outcome: _histogram(rows) for outcome, rows in by_outcome.items()},
        pickup_seconds=_histogram(pickups),
    )


def job_next_run_at() -> Op[float | None]:
    """When the next queued job is due (store time); None when no job is queued."""
    rows = yield Read(Statement(queries.query("job_next_run_at"), {}), Consistency.LINEARIZABLE)
    value = rows[0]["run_at"] if rows else None
    return None if value is None else float(value)
