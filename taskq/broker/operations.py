"""The broker's operations: the only module that builds SQL statements.

Each operation is a plan (see :mod:`taskq.broker.plan`): it yields one atomic
batch or read at a time, and the sync or async runner carries it out. Names
put the entity first (``job_claim``, ``worker_heartbeat``). Every operation
that depends on time takes ``now`` (unix seconds) for tests; left ``None``,
the store's clock decides.
"""

from __future__ import annotations

import enum
import json
import math
import random
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from taskq import errors, fast_json
from taskq.broker import job_validation, queries, schedules
from taskq.broker.plan import Op, Read, Sleep, Write
from taskq.broker.records import (
    AttemptReport,
    ClaimedJob,
    Execution,
    Fenced,
    Job,
    JobSpec,
    JobState,
    Lease,
    PayloadKind,
    QueueStats,
    WorkerInfo,
)
from taskq.broker.store import Consistency, Row, SqlValue, Statement

_NEVER = 2**62  # keyset start: larger than any job id


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delays: ``base * 2**(attempt-1)``, capped, times a random jitter factor."""

    base: float = 1.0
    cap: float = 3600.0
    jitter: float = 0.25

    def factor(self) -> float:
        return 1.0 + random.uniform(-self.jitter, self.jitter)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """Which of a worker's leases were extended, and which are gone."""

    kept: frozenset[Lease]
    lost: frozenset[Lease]
    leader_held: bool | None = None
    """With a leader lease to renew: whether the worker holds it after the heartbeat."""


@dataclass(frozen=True, slots=True)
class LeaderRenewal:
    """A leader lease for a heartbeat to renew in the same write (see ``job_heartbeat``)."""

    name: str
    ttl_seconds: float


# -- encoding ---------------------------------------------------------------


# Built once: json.dumps builds an encoder on every call that asks for other than its defaults.
_STRICT_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def to_json(value: Any, what: str, *, decoded: bool = False, field: str | None = None) -> str:
    """Encode ``value`` as JSON or raise :class:`taskq.errors.InvalidJob` saying why.

    ``decoded``: ``value`` was itself decoded from JSON (a job's result, say),
    so the faster encoder gives the same answer.
    """
    try:
        if decoded:
            return fast_json.dumps_decoded(value)
        return _STRICT_JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise errors.InvalidJob(
            f"{what} must be JSON (lists, dicts, str, numbers, bools, None): {exc}", field=field
        ) from exc


def _from_json(text: Any) -> Any:
    return fast_json.loads(text) if isinstance(text, str) else text


def _clock(now: float | None) -> Statement:
    return Statement(queries.query("clock_tick"), {"now": now})


def _ids_param(ids: Sequence[int]) -> str:
    return json.dumps([int(job_id) for job_id in ids])


# -- enqueue ----------------------------------------------------------------


MAX_PAYLOAD_BYTES = 1 << 20
"""The largest payload (a call's arguments, python_exec code) a job may carry, as JSON.

A queue is no place for data: a worker holds every payload it claims in
memory, and a huge one would slow every store read of the job. Pass a path
or a key instead; clients may set another bound.
"""


def validate_spec(spec: JobSpec, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> dict[str, Any]:
    """Check one job and return the row the enqueue statement reads; raises InvalidJob.

    The checks are :func:`taskq.broker.job_validation.check_spec`'s, then the
    payload's JSON and its size.
    """
    job_validation.check_spec(spec)
    payload = to_json(spec.payload, "the payload", field="payload")
    # ASCII JSON (the encoder's default): its length in characters is its size in bytes.
    if len(payload) > max_payload_bytes:
        raise errors.InvalidJob(
            f"the payload (arguments included) is {len(payload)} bytes of JSON, over the limit "
            f"of {max_payload_bytes}; pass a path or a key to the data instead",
            field="payload",
        )
    key = spec.idempotency_key
    return {
        "queue": spec.queue,
        "kind": PayloadKind(spec.kind).value,
        "payload": payload,
        "priority": spec.priority,
        "run_at": spec.run_at,
        "delay": float(spec.delay),
        "max_attempts": spec.max_attempts,
        "timeout": spec.timeout,
        "limits": to_json(spec.limits, "limits"),
        "labels": to_json(sorted(set(spec.labels)), "labels"),
        "key": f"auto:{uuid.uuid4().hex}" if key is None else key,
        # Only a caller's own key can come back with another request: a random
        # one comes back only in a resend, so its job needs no fingerprint.
        "fingerprint": None if key is None else job_validation.fingerprint(spec),
        "submitter": spec.submitter,
    }


def _rate_limited(submitter: str, count: int, now: float | None) -> Op[errors.RateLimited]:
    """The error for ``submitter`` going over its rate, saying when to retry."""
    rows = yield Read(
        Statement(queries.query("submit_limit_of"), {"submitter": submitter}),
        Consistency.LINEARIZABLE,
    )
    if not rows:
        return errors.RateLimited(f"submitter {submitter!r} is over its rate limit", 1.0)
    limit = rows[0]
    rate, period = float(limit["rate"]), float(limit["period"])
    if count > rate:
        return errors.RateLimited(
            f"submitter {submitter!r} may submit at most {rate:g} jobs per {period:g} s; "
            f"{count} in one request can never fit: split it",
            None,
        )
    tokens = float(limit["tokens"]) if limit["tokens"] is not None else rate
    current = float(limit["now"]) if now is None else now
    elapsed = current - float(limit["updated_at"] or current)
    available = min(rate, tokens + elapsed * rate / period)
    retry_after = max(0.0, (count - available) * period / rate)
    return errors.RateLimited(
        f"submitter {submitter!r} may submit {rate:g} jobs per {period:g} s; "
        f"nothing was written, retry in {retry_after:.1f} s",
        retry_after,
    )


def job_enqueue(
    specs: Sequence[JobSpec],
    *,
    now: float | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Op[list[int]]:
    """Enqueue jobs in one request; return their ids in order.

    A job whose idempotency key is already stored with the same request (see
    :func:`taskq.broker.job_validation.fingerprint`) is not enqueued again:
    its existing id is returned. The same key with a different request is
    :class:`taskq.errors.IdempotencyConflict`. Every job carries a key (a
    random one when the caller gave none), so the batch is safe to resend
    after an unknown outcome. Every job is checked before anything is
    written, and a refused request (a bad job, a conflict, a submitter over
    its rate) writes nothing and spends no rate.
    """
    rows = [validate_spec(spec, max_payload_bytes=max_payload_bytes) for spec in specs]
    if not rows:
        return []
    job_validation.check_keys_within([(row["key"], row["fingerprint"]) for row in rows])
    keys_by_submitter: dict[str, list[str]] = {}
    for row in rows:
        keys_by_submitter.setdefault(row["submitter"], []).append(row["key"])
    per_submitter = sorted(keys_by_submitter.items())
    spends = [
        Statement(
            queries.query("submit_bucket_spend"), {"submitter": who, "keys": json.dumps(keys)}
        )
        for who, keys in per_submitter
    ]
    statement = Statement(queries.query("job_enqueue"), {"specs": to_json(rows, "jobs")})
    try:
        results = yield Write([_clock(now), *spends, statement], idempotent=True)
    except errors.ConstraintViolation as exc:
        if 1 <= exc.index <= len(spends):
            who, keys = per_submitter[exc.index - 1]
            raise (yield from _rate_limited(who, len(keys), now)) from exc
        if exc.index != len(spends) + 1:
            raise
        conflict = yield from _key_conflict(rows)
        if conflict is None:
            raise exc
        raise conflict from exc
    ids = {row["idempotency_key"]: int(row["id"]) for row in results[-1].rows}
    missing = sorted({row["key"] for row in rows} - set(ids))
    if missing:
        found = yield from _jobs_by_key(missing)
        ids.update({row["idempotency_key"]: int(row["id"]) for row in found})
    return [ids[row["key"]] for row in rows]


def _jobs_by_key(keys: Sequence[str]) -> Op[list[Row]]:
    rows: list[Row] = yield Read(
        Statement(queries.query("job_by_key"), {"keys": json.dumps(list(keys))}),
        Consistency.LINEARIZABLE,
    )
    return rows


def _key_conflict(rows: list[dict[str, Any]]) -> Op[errors.IdempotencyConflict | None]:
    """The error for a key stored with another request's fingerprint; None if none is now."""
    wanted = {row["key"]: row["fingerprint"] for row in rows if row["fingerprint"] is not None}
    for stored in (yield from _jobs_by_key(sorted(wanted))):
        key, held = stored["idempotency_key"], stored["request_fingerprint"]
        if held is not None and held != wanted[key]:
            return errors.IdempotencyConflict(
                f"idempotency key {key!r} already names job {stored['id']}, submitted with a "
                "different request (function, arguments, queue or options); nothing was written",
                job_id=int(stored["id"]),
            )
    return None


# -- claim and leases ---------------------------------------------------------


def _claim_sql(queue_count: int) -> str:
    branch = queries.query("job_claim_candidates")
    candidates = "\nUNION ALL\n".join(branch.format(n=index) for index in range(queue_count))
    return queries.query("job_claim").format(candidates=candidates)


def _claimed(row: Row) -> ClaimedJob:
    return ClaimedJob(
        lease=Lease(job_id=int(row["id"]), token=str(row["lease_token"])),
        kind=PayloadKind(row["kind"]),
        payload=_from_json(row["payload"]),
        queue=str(row["queue"]),
        attempt=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        timeout=row["timeout"],
        limits=_from_json(row["limits"]) or {},
        lease_until=float(row["lease_until"]),
    )


class ClaimRequest(msgspec.Struct, frozen=True):
    """A worker asking for up to ``limit`` jobs of its queues, with its labels."""

    worker_id: str
    queues: tuple[str, ...]
    limit: int
    lease_seconds: float
    labels: tuple[str, ...] = ()


def _claim_statements(request: ClaimRequest, claim_token: str) -> list[Statement]:
    """The claim, its execution rows and its rate-limit spending: three statements."""
    queues = list(dict.fromkeys(request.queues))
    params: dict[str, Any] = {
        "worker_id": request.worker_id,
        "claim_token": claim_token,
        "lease_seconds": float(request.lease_seconds),
        "labels": json.dumps(sorted(set(request.labels))),
        "limit": int(request.limit),
    }
    params.update({f"queue_{index}": queue for index, queue in enumerate(queues)})
    token_params = {"worker_id": request.worker_id, "claim_token": claim_token}
    return [
        Statement(_claim_sql(len(queues)), params),
        Statement(queries.query("execution_start"), token_params),
        Statement(
            queries.query("queue_rate_spend"), {**token_params, "queues": json.dumps(queues)}
        ),
    ]


def _claimed_rows(rows: list[Row]) -> list[ClaimedJob]:
    return sorted((_claimed(row) for row in rows), key=lambda job: job.lease.job_id)


def _claimed_by_token(request: ClaimRequest, claim_token: str) -> Op[list[ClaimedJob]]:
    """What a claim whose outcome is unknown did claim (nothing, if it was not applied)."""
    rows = yield Read(
        Statement(
            queries.query("job_claimed_by_token"),
            {"worker_id": request.worker_id, "claim_token": claim_token},
        ),
        Consistency.LINEARIZABLE,
    )
    return _claimed_rows(rows)


def job_claim(
    worker_id: str,
    queues: Sequence[str],
    *,
    limit: int,
    lease_seconds: float,
    labels: Sequence[str] = (),
    now: float | None = None,
) -> Op[list[ClaimedJob]]:
    """Claim up to ``limit`` runnable jobs of ``queues`` for one worker, in one request.

    Jobs come in claim order (priority, then run_at, then id), skip paused
    queues and jobs that need labels the worker lacks, get a lease token new
    for this claim, and get an execution row in the same batch. When the
    outcome is unknown, a linearizable read of this claim's token finds what
    was claimed, so no attempt is lost or doubled.
    """
    request = ClaimRequest(worker_id, tuple(queues), limit, lease_seconds, tuple(labels))
    if request.limit < 1 or not request.queues:
        return []
    claim_token = secrets.token_hex(8)
    try:
        results = yield Write([_clock(now), *_claim_statements(request, claim_token)])
    except errors.OutcomeUnknown:
        return (yield from _claimed_by_token(request, claim_token))
    return _claimed_rows(results[1].rows)


def job_claimable(queues: Sequence[str]) -> Op[bool]:
    """Whether a claim on ``queues`` would find a job now: a cheap read for idle workers.

    Read at ``NONE`` consistency: any node answers from its own copy, and a
    stale answer costs at most one empty claim or one poll interval.
    """
    rows = yield Read(
        Statement(queries.query("job_claimable"), {"queues": json.dumps(list(queues))}),
        Consistency.NONE,
    )
    return bool(rows and rows[0]["ready"])


def job_heartbeat(
    worker_id: str,
    leases: Sequence[Lease],
    *,
    lease_seconds: float,
    busy: int | None = None,
    renew: LeaderRenewal | None = None,
    now: float | None = None,
) -> Op[HeartbeatResult]:
    """Extend every lease the worker still holds, in one statement; report the lost ones.

    A lease is lost when its job was requeued after expiry (the token changed)
    or a cancel was requested: the worker must stop that job. ``busy`` is how
    many of these jobs are in the worker's slots now (by default all of them):
    the rest were claimed ahead and wait for a slot. ``renew`` also keeps (or
    takes) a leader lease for the worker in the same write, so that leading
    costs an idle worker no writes beyond its heartbeats.
    """
    tokens = json.dumps([lease.token for lease in leases])
    batch = [
        _clock(now),
        Statement(
            queries.query("job_heartbeat"),
            {"worker_id": worker_id, "tokens": tokens, "lease_seconds": float(lease_seconds)},
        ),
        Statement(
            queries.query("worker_heartbeat"),
            {"worker_id": worker_id, "running": len(leases) if busy is None else busy},
        ),
    ]
    if renew is not None:
        batch.append(_leader_elect(renew.name, worker_id, renew.ttl_seconds))
    results = yield Write(batch, idempotent=True)
    kept_tokens = {str(row["lease_token"]) for row in results[1].rows}
    kept = frozenset(lease for lease in leases if lease.token in kept_tokens)
    leader_held = None
    if renew is not None:
        leader_held = any(row["holder"] == worker_id for row in results[3].rows)
    return HeartbeatResult(kept=kept, lost=frozenset(leases) - kept, leader_held=leader_held)


class Verdict(enum.Enum):
    """What a worker reports about an attempt it ran."""

    COMPLETE = "complete"
    FAIL = "fail"
    RELEASE = "release"


class Report(msgspec.Struct, frozen=True):
    """One finished attempt, as reported under its lease."""

    lease: Lease
    verdict: Verdict
    attempt: AttemptReport
    result: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    result_json: str | None = None
    """``result`` already encoded by :func:`to_json`, when the caller had to encode it anyway."""


# The statements that record each kind of report, by verdict.
_REPORT_QUERIES = {
    Verdict.COMPLETE: "job_complete",
    Verdict.FAIL: "job_fail",
    Verdict.RELEASE: "job_release",
}


def _report_statements(reports: Sequence[Report], backoff: Backoff) -> list[Statement]:
    """Statements recording ``reports``: one per kind of change, however many reports.

    The first finishes the attempts; each after it updates the jobs of one
    verdict and returns the (id, lease_token) of every job it changed.
    """
    attempts: list[dict[str, Any]] = []
    by_verdict: dict[Verdict, list[dict[str, Any]]] = {verdict: [] for verdict in Verdict}
    for report in reports:
        fence = {"job_id": report.lease.job_id, "lease_token": report.lease.token}
        error = None
        if report.verdict is Verdict.COMPLETE:
            result = report.result_json
            if result is None:
                result = to_json(report.result, "the result")
            row = {**fence, "result": result}
        elif report.verdict is Verdict.FAIL:
            error = to_json(report.error or {"type": "Error", "message": ""}, "the error")
            row = {
                **fence,
                "error": error,
                "retryable": int(report.retryable),
                "jitter": backoff.factor(),
            }
        else:
            row = fence
        by_verdict[report.verdict].append(row)
        attempt = report.attempt
        attempts.append(
            {
                **fence,
                "outcome": attempt.outcome,
                "exit_code": attempt.exit_code,
                "signal": attempt.signal,
                "peak_rss_bytes": attempt.peak_rss_bytes,
                "cpu_seconds": attempt.cpu_seconds,
                "log_tail": attempt.log_tail,
                "error": error,
            }
        )
    statements = [
        Statement(queries.query("execution_finish"), {"reports": fast_json.dumps_text(attempts)})
    ]
    for verdict, rows in by_verdict.items():
        if not rows:
            continue
        params: dict[str, SqlValue] = {"reports": fast_json.dumps_text(rows)}
        if verdict is Verdict.FAIL:
            params |= {"backoff_base": backoff.base, "backoff_cap": backoff.cap}
        statements.append(Statement(queries.query(_REPORT_QUERIES[verdict]), params))
    return statements


def job_report(
    reports: Sequence[Report], *, backoff: Backoff = Backoff(), now: float | None = None
) -> Op[list[Fenced]]:
    """Record finished attempts in one request, each fenced by its own lease.

    Every report is accepted or refused on its own: a refused one (the lease
    moved on) changes nothing, and the worker drops its result. An unknown
    outcome is resolved by reading the jobs: one that left ``running`` under
    its token was recorded; one still running under its token is sent again;
    any other lost its lease.
    """
    verdicts, _ = yield from _report_and_claim(reports, None, backoff, now)
    return verdicts


def job_report_and_claim(
    reports: Sequence[Report],
    claim: ClaimRequest,
    *,
    backoff: Backoff = Backoff(),
    now: float | None = None,
) -> Op[tuple[list[Fenced], list[ClaimedJob]]]:
    """:func:`job_report`, and in the same request :func:`job_claim` for the freed slots.

    A busy worker then commits once per batch of finished jobs instead of
    twice (on the embedded store, one fsync instead of two).
    """
    return (yield from _report_and_claim(reports, claim, backoff, now))


def _report_and_claim(
    reports: Sequence[Report],
    claim: ClaimRequest | None,
    backoff: Backoff,
    now: float | None,
) -> Op[tuple[list[Fenced], list[ClaimedJob]]]:
    pending = list(reports)
    verdicts: dict[Lease, Fenced] = {}
    claimed: list[ClaimedJob] = []
    if claim is not None and (claim.limit < 1 or not claim.queues):
        claim = None
    for _ in range(3):
        if not pending and claim is None:
            break
        batch = [_clock(now)]
        # Indexes of the statements whose rows name the jobs that took their report.
        job_updates: range = range(0)
        if pending:
            reporting = _report_statements(pending, backoff)
            job_updates = range(len(batch) + 1, len(batch) + len(reporting))
            batch += reporting
        claim_token = secrets.token_hex(8)
        claim_at = len(batch)
        if claim is not None:
            batch += _claim_statements(claim, claim_token)
        try:
            results = yield Write(batch)
        except errors.OutcomeUnknown:
            if claim is not None:
                claimed = yield from _claimed_by_token(claim, claim_token)
                claim = None
            if not pending:
                break
            ids = json.dumps([report.lease.job_id for report in pending])
            rows = yield Read(
                Statement(queries.query("job_lease_states"), {"ids": ids}),
                Consistency.LINEARIZABLE,
            )
            found = {int(row["id"]): row for row in rows}
            still_running = []
            for report in pending:
                row = found.get(report.lease.job_id)
                if row is None or row["lease_token"] != report.lease.token:
                    verdicts[report.lease] = Fenced.LEASE_LOST
                elif row["state"] != JobState.RUNNING:
                    verdicts[report.lease] = Fenced.ACCEPTED
                else:
                    still_running.append(report)
            pending = still_running
            continue
        taken = {
            (int(row["id"]), str(row["lease_token"]))
            for index in job_updates
            for row in results[index].rows
        }
        for report in pending:
            lease = report.lease
            verdicts[lease] = (
                Fenced.ACCEPTED if (lease.job_id, lease.token) in taken else Fenced.LEASE_LOST
            )
        if claim is not None:
            claimed = _claimed_rows(results[claim_at].rows)
        pending, claim = [], None
    if pending:
        raise errors.OutcomeUnknown(
            f"reports on jobs {[report.lease.job_id for report in pending]} could not be confirmed"
        )
    return [verdicts[report.lease] for report in reports], claimed


def _one(report: Report, backoff: Backoff, now: float | None) -> Op[Fenced]:
    [verdict] = yield from job_report([report], backoff=backoff, now=now)
    return verdict


def job_complete(
    lease: Lease,
    result: Any,
    report: AttemptReport | None = None,
    *,
    now: float | None = None,
) -> Op[Fenced]:
    """Record success and the result, if ``lease`` still holds the job."""
    attempt = report or AttemptReport(outcome="succeeded")
    return (
        yield from _one(Report(lease, Verdict.COMPLETE, attempt, result=result), Backoff(), now)
    )


def job_fail(
    lease: Lease,
    error: dict[str, Any],
    report: AttemptReport | None = None,
    *,
    retryable: bool = True,
    backoff: Backoff = Backoff(),
    now: float | None = None,
) -> Op[Fenced]:
    """Record a failed attempt: retry later with exponential backoff, or dead when spent.

    ``error`` holds at least ``type`` and ``message`` (and often a
    ``traceback``). A non-retryable error ends the job as ``failed`` at once.
    """
    attempt = report or AttemptReport(outcome="error")
    failure = Report(lease, Verdict.FAIL, attempt, error=error, retryable=retryable)
    return (yield from _one(failure, backoff, now))


def job_release(
    lease: Lease, report: AttemptReport | None = None, *, now: float | None = None
) -> Op[Fenced]:
    """Give a job back without counting the attempt (a draining worker).

    A job with a cancel request becomes ``cancelled`` instead: this is also
    how a worker acknowledges a cancel it acted on.
    """
    attempt = report or AttemptReport(outcome="released")
    return (yield from _one(Report(lease, Verdict.RELEASE, attempt), Backoff(), now))


def job_progress(lease: Lease, progress: float, message: str = "") -> Op[Fenced]:
    """Record how far a running job got (0..1) and a short message."""
    if not 0.0 <= progress <= 1.0:
        raise errors.InvalidJob(f"progress must be between 0 and 1, got {progress}")
    statement = Statement(
        queries.query("job_progress"),
        {
            "job_id": lease.job_id,
            "lease_token": lease.token,
            "progress": float(progress),
            "message": message[:500],
        },
    )
    results = yield Write([statement], idempotent=True)
    return Fenced.ACCEPTED if results[0].rows else Fenced.LEASE_LOST


# -- by hand --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CancelResult:
    """Jobs cancelled at once (they were queued) and jobs asked to stop (running)."""

    cancelled: tuple[int, ...]
    requested: tuple[int, ...]


def job_cancel(ids: Sequence[int], *, now: float | None = None) -> Op[CancelResult]:
    """Cancel queued jobs now; ask running ones to stop at their worker's next heartbeat."""
    params = {"ids": _ids_param(ids)}
    results = yield Write(
        [
            _clock(now),
            Statement(queries.query("job_cancel_queued"), params),
            Statement(queries.query("job_cancel_running"), params),
        ],
        idempotent=True,
    )
    return CancelResult(
        cancelled=tuple(sorted(int(row["id"]) for row in results[1].rows)),
        requested=tuple(sorted(int(row["id"]) for row in results[2].rows)),
    )


def job_retry(ids: Sequence[int], *, now: float | None = None) -> Op[list[int]]:
    """Queue failed, dead or cancelled jobs again now; return the ids that moved."""
    results = yield Write(
        [_clock(now), Statement(queries.query("job_retry"), {"ids": _ids_param(ids)})],
        idempotent=True,
    )
    return sorted(int(row["id"]) for row in results[1].rows)


def queue_set_paused(
    queue: str, paused: bool, *, create: bool = False, now: float | None = None
) -> Op[None]:
    """Pause (claims skip the queue) or resume a queue.

    A queue exists while it has jobs or settings (a pause, a limit); any
    other name is refused, since a misspelt one would quietly become a new
    queue, unless ``create`` asks for it: to pause a queue ahead of its jobs.
    """
    job_validation.check_name(queue, "queue")
    params: dict[str, SqlValue] = {"queue": queue, "paused": int(paused), "create": int(create)}
    results = yield Write(
        [_clock(now), Statement(queries.query("queue_set_paused"), params)], idempotent=True
    )
    if not results[1].rows:
        action = "pause" if paused else "resume"
        raise errors.QueueNotFound(
            f"no queue named {queue!r}: it has no jobs and no settings; to {action} it "
            "all the same, ask to create it (taskq pause/resume --create, create=True)"
        )


class Keep(enum.Enum):
    """A limit left as it is: ``queue_set_limits`` changes only the limits it is given."""

    KEEP = "keep"


KEEP = Keep.KEEP


def queue_set_limits(
    queue: str,
    *,
    max_running: int | Keep | None = KEEP,
    rate_limit: float | Keep | None = KEEP,
    rate_period: float = 1.0,
    now: float | None = None,
) -> Op[None]:
    """Cap a queue cluster-wide: ``max_running`` jobs at once, ``rate_limit`` starts per period.

    ``None`` lifts a limit; a limit not given (``KEEP``) stays as the store
    has it, in the same statement, so two people changing different limits
    at once do not undo each other. A new rate starts with a full bucket. The
    caps are applied by every claim, in the store.
    """
    if isinstance(max_running, int) and max_running < 0:
        raise errors.ConfigError(f"max_running must be 0 or more, got {max_running}")
    if isinstance(rate_limit, int | float) and not (math.isfinite(rate_limit) and rate_limit > 0):
        raise errors.ConfigError(f"rate limit must be a positive number, got {rate_limit}")
    if not (math.isfinite(rate_period) and rate_period > 0):
        raise errors.ConfigError(f"rate period must be positive seconds, got {rate_period}")
    rate = None if rate_limit is KEEP else rate_limit
    yield Write(
        [
            _clock(now),
            Statement(
                queries.query("queue_set_limits"),
                {
                    "queue": queue,
                    "set_max_running": int(max_running is not KEEP),
                    "max_running": None if max_running is KEEP else max_running,
                    "set_rate": int(rate_limit is not KEEP),
                    "rate_limit": rate,
                    "rate_period": rate_period if rate is not None else None,
                },
            ),
        ],
        idempotent=True,
    )


@dataclass(frozen=True, slots=True)
class SubmitLimit:
    """At most ``rate`` submissions per ``period`` seconds ("*": everyone without their own)."""

    submitter: str
    rate: float
    period: float


def submit_limit_set(submitter: str, rate: float, period: float) -> Op[None]:
    """Limit a submitter's (or, with "*", everyone's) submission rate."""
    if not (math.isfinite(rate) and rate > 0 and math.isfinite(period) and period > 0):
        raise errors.ConfigError(
            f"a submit limit needs a positive rate and period, got {rate}/{period}"
        )
    yield Write(
        [
            Statement(
                queries.query("submit_limit_set"),
                {"submitter": submitter, "rate": float(rate), "period": float(period)},
            )
        ],
        idempotent=True,
    )


def submit_limit_remove(submitter: str) -> Op[None]:
    """Lift a submitter's own limit (the "*" limit, if any, applies again)."""
    yield Write(
        [Statement(queries.query("submit_limit_delete"), {"submitter": submitter})],
        idempotent=True,
    )


def submit_limit_list() -> Op[list[SubmitLimit]]:
    """Every submitter's limit, "*" (everyone else) included."""
    rows = yield Read(Statement(queries.query("submit_limit_list")))
    return [SubmitLimit(row["submitter"], float(row["rate"]), float(row["period"])) for row in rows]


# -- reads ------------------------------------------------------------------------


def _job(row: Row) -> Job:
    return Job(
        id=int(row["id"]),
        queue=row["queue"],
        kind=PayloadKind(row["kind"]),
        payload=_from_json(row["payload"]),
        state=JobState(row["state"]),
        priority=int(row["priority"]),
        run_at=float(row["run_at"]),
        attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        timeout=row["timeout"],
        limits=_from_json(row["limits"]) or {},
        labels=tuple(_from_json(row["labels"]) or ()),
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
        result=_from_json(row["result"]),
        error=_from_json(row["error"]),
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
    before: int | None = None,
    limit: int = 50,
) -> Op[list[Job]]:
    """Jobs newest first, filtered; pass the last id seen as ``before`` for the next page.

    ``state`` is a JobState or its name; ``text`` matches a queue name
    exactly or any part of the payload.
    """
    if state is not None:
        state = job_validation.job_state(state)
    params: dict[str, Any] = {
        "text": text or None,
        "state": state.value if state else None,
        "queue": queue,
        "submitter": submitter,
        "worker_id": worker_id,
        "before": int(before) if before is not None else _NEVER,
        "limit": max(1, min(int(limit), 1000)),
    }
    # Each query leads with the filter its index serves; the rest are residual.
    if worker_id is not None:
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


def job_counts() -> Op[list[QueueStats]]:
    """Counts per state of every queue, with its paused flag."""
    counts = yield Read(Statement(queries.query("job_counts")))
    queue_rows = yield Read(Statement(queries.query("queue_list")))
    settings = {row["name"]: row for row in queue_rows}
    by_queue: dict[str, dict[JobState, int]] = {name: {} for name in settings}
    for row in counts:
        by_queue.setdefault(row["queue"], {})[JobState(row["state"])] = int(row["n"])
    return [
        QueueStats(
            queue=name,
            paused=bool(settings.get(name, {}).get("paused")),
            counts={state: by_queue[name].get(state, 0) for state in JobState},
            max_running=settings.get(name, {}).get("max_running"),
            rate_limit=settings.get(name, {}).get("rate_limit"),
            rate_period=settings.get(name, {}).get("rate_period"),
        )
        for name in sorted(by_queue)
    ]


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
        log_tail=row["log_tail"],
        error=_from_json(row["error"]),
    )


def execution_list(
    *,
    job_id: int | None = None,
    worker_id: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> Op[list[Execution]]:
    """The attempts of one job (oldest first), or of one worker (newest first, paged)."""
    if job_id is not None:
        statement = Statement(queries.query("execution_list_by_job"), {"job_id": int(job_id)})
    elif worker_id is not None:
        statement = Statement(
            queries.query("execution_list_by_worker"),
            {
                "worker_id": worker_id,
                "before": int(before) if before is not None else _NEVER,
                "limit": max(1, min(int(limit), 1000)),
            },
        )
    else:
        raise ValueError("execution_list needs a job_id or a worker_id")
    rows = yield Read(statement)
    return [_execution(row) for row in rows]


@dataclass(frozen=True, slots=True)
class ThroughputBucket:
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


# -- workers --------------------------------------------------------------------


def worker_register(
    worker_id: str,
    *,
    name: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    labels: Sequence[str],
    slots: int,
    now: float | None = None,
) -> Op[None]:
    """Record a worker as active (again, if it restarts under the same id)."""
    yield Write(
        [
            _clock(now),
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
            _clock(now),
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
            queues=tuple(_from_json(row["queues"])),
            labels=tuple(_from_json(row["labels"])),
            slots=int(row["slots"]),
            running=int(row["running"]),
            state=row["state"],
            started_at=float(row["started_at"]),
            heartbeat_at=float(row["heartbeat_at"]),
        )
        for row in rows
    ]


# -- maintenance ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequeueResult:
    """Jobs whose lease expired, by the state they moved to."""

    requeued: tuple[int, ...]
    dead: tuple[int, ...]
    cancelled: tuple[int, ...]


def job_requeue_expired(*, now: float | None = None) -> Op[RequeueResult]:
    """Give back jobs whose lease ran out; the attempt counts, dead when attempts are spent."""
    results = yield Write(
        [
            _clock(now),
            Statement(queries.query("execution_expire")),
            Statement(queries.query("job_requeue_expired")),
        ],
        idempotent=True,
    )
    moved: dict[str, list[int]] = {"queued": [], "dead": [], "cancelled": []}
    for row in results[2].rows:
        moved[row["state"]].append(int(row["id"]))
    return RequeueResult(
        requeued=tuple(sorted(moved["queued"])),
        dead=tuple(sorted(moved["dead"])),
        cancelled=tuple(sorted(moved["cancelled"])),
    )


@dataclass(frozen=True, slots=True)
class MaintenanceDue:
    """Whether each maintenance service has anything to do now."""

    expired_leases: bool
    lost_workers: bool
    prunable_jobs: bool


def maintenance_due(
    *,
    grace_seconds: float = 30.0,
    retention_seconds: float = 7 * 24 * 3600.0,
    now: float | None = None,
) -> Op[MaintenanceDue]:
    """A cheap read that lets idle maintenance services skip their writes."""
    rows = yield Read(
        Statement(
            queries.query("maintenance_due"),
            {
                "now": now,
                "grace_seconds": float(grace_seconds),
                "retention_seconds": float(retention_seconds),
            },
        ),
        Consistency.NONE,
    )
    row = rows[0]
    return MaintenanceDue(
        expired_leases=bool(row["expired_leases"]),
        lost_workers=bool(row["lost_workers"]),
        prunable_jobs=bool(row["prunable_jobs"]),
    )


def worker_mark_lost(*, grace_seconds: float, now: float | None = None) -> Op[list[str]]:
    """Mark workers lost whose last heartbeat is older than ``grace_seconds``."""
    results = yield Write(
        [
            _clock(now),
            Statement(queries.query("worker_mark_lost"), {"grace_seconds": float(grace_seconds)}),
        ],
        idempotent=True,
    )
    return sorted(str(row["id"]) for row in results[1].rows)


def job_prune(
    *, retention_seconds: float, limit: int = 10_000, now: float | None = None
) -> Op[int]:
    """Delete finished jobs (and their executions) older than the retention; return how many."""
    params = {"retention_seconds": float(retention_seconds), "limit": int(limit)}
    results = yield Write(
        [
            _clock(now),
            Statement(queries.query("execution_prune"), params),
            Statement(queries.query("job_prune"), params),
            Statement(
                queries.query("worker_prune"), {"retention_seconds": float(retention_seconds)}
            ),
        ],
        idempotent=True,
    )
    return len(results[2].rows)


def leader_attempt_elect(
    name: str, holder: str, *, ttl_seconds: float, now: float | None = None
) -> Op[bool]:
    """Take or keep the leader lease ``name``; True when ``holder`` holds it now."""
    results = yield Write([_clock(now), _leader_elect(name, holder, ttl_seconds)], idempotent=True)
    return any(row["holder"] == holder for row in results[1].rows)


def _leader_elect(name: str, holder: str, ttl_seconds: float) -> Statement:
    return Statement(
        queries.query("leader_attempt_elect"),
        {"name": name, "holder": holder, "ttl_seconds": float(ttl_seconds)},
    )


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


def job_wait(job_id: int, *, timeout: float | None, poll_seconds: float = 0.1) -> Op[Job]:
    """Poll until the job finishes; raise ResultTimeout after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = min(poll_seconds, 0.02)
    while True:
        rows = yield Read(
            Statement(queries.query("job_get"), {"id": int(job_id)}), Consistency.WEAK
        )
        if not rows:
            raise errors.JobNotFound(f"no job with id {job_id}")
        job = _job(rows[0])
        if job.state.finished:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.ResultTimeout(
                f"job {job_id} is still {job.state.value} after {timeout:g} s"
            )
        pause = delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0))
        yield Sleep(pause)
        # Start fast (most jobs are short), then settle at poll_seconds.
        delay = min(delay * 2, poll_seconds)


# -- schedules --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schedule:
    """A periodic job as stored."""

    name: str
    timing: schedules.Timing
    spec: dict[str, Any]
    paused: bool
    catch_up: schedules.CatchUp
    next_fire_at: float
    last_fired_at: float | None


@dataclass(frozen=True, slots=True)
class Fired:
    """A tick that a round enqueued."""

    schedule: str
    fire_at: float
    job_id: int


def _store_now(now: float | None) -> Op[float]:
    """``now`` if injected, else the store's clock (the leader's, on rqlite)."""
    if now is not None:
        return now
    rows = yield Read(Statement(queries.query("clock_read")), Consistency.WEAK)
    return float(rows[0]["now"])


@dataclass(frozen=True, slots=True)
class ScheduleAdded:
    """The schedule as ``schedule_add`` left it, and whether it replaced one of its name."""

    schedule: Schedule
    replaced: bool


def schedule_add(
    name: str,
    spec: JobSpec,
    *,
    cron: str | None = None,
    every_seconds: float | None = None,
    timezone: str = "UTC",
    catch_up: schedules.CatchUp = schedules.CatchUp.ONCE,
    replace: bool = False,
    now: float | None = None,
) -> Op[ScheduleAdded]:
    """Create the schedule ``name``, which enqueues ``spec`` on every tick.

    A schedule of that name is replaced (keeping its pause) only when
    ``replace`` says so; otherwise the name being taken is an error, unless
    by this very schedule: adding it exactly as it stands changes nothing, so
    a set-up script may run twice, and a resent request finds its own work.
    """
    schedules.validate_name(name)
    row = validate_spec(spec)
    for one_off in ("key", "fingerprint", "run_at", "delay", "submitter"):
        row.pop(one_off)
    current = yield from _store_now(now)
    timing = schedules.validate_timing(
        cron=cron, every_seconds=every_seconds, timezone=timezone, anchor=current
    )
    definition: dict[str, SqlValue] = {
        "name": name,
        "cron": cron,
        "every_seconds": every_seconds,
        "timezone": timezone,
        "spec": to_json(row, "the job"),
        "catch_up": schedules.CatchUp(catch_up).value,
    }
    values: dict[str, SqlValue] = {
        **definition,
        "next_fire_at": schedules.next_tick(timing, current),
    }
    batch = [_clock(current)]
    if replace:
        batch.append(Statement(queries.query("schedule_replace"), values))
    batch.append(Statement(queries.query("schedule_insert"), values))
    results = yield Write(batch, idempotent=True)
    replaced = results[1].rows if replace else []
    if replaced or results[-1].rows:
        return ScheduleAdded(_schedule((replaced or results[-1].rows)[0]), bool(replaced))
    rows = yield Read(
        Statement(queries.query("schedule_get"), {"name": name}), Consistency.LINEARIZABLE
    )
    if rows and all(rows[0][field] == value for field, value in definition.items()):
        return ScheduleAdded(_schedule(rows[0]), replaced=False)
    raise errors.ScheduleExists(
        f"schedule {name!r} already exists; to replace it, ask to (taskq schedule add "
        "--replace, replace=True), or remove it first"
    )


def schedule_remove(name: str) -> Op[bool]:
    """Delete a schedule; False when there was none of that name."""
    results = yield Write(
        [Statement(queries.query("schedule_delete"), {"name": name})], idempotent=True
    )
    return bool(results[0].rows)


def schedule_set_paused(name: str, paused: bool) -> Op[bool]:
    """Pause or resume a schedule; False when there is none of that name."""
    results = yield Write(
        [Statement(queries.query("schedule_set_paused"), {"name": name, "paused": int(paused)})],
        idempotent=True,
    )
    return bool(results[0].rows)


def _schedule(row: Row) -> Schedule:
    return Schedule(
        name=row["name"],
        timing=schedules.Timing(
            cron=row["cron"],
            every_seconds=row["every_seconds"],
            timezone=row["timezone"],
            anchor=float(row["created_at"]),
        ),
        spec=_from_json(row["spec"]),
        paused=bool(row["paused"]),
        catch_up=schedules.CatchUp(row["catch_up"]),
        next_fire_at=float(row["next_fire_at"]),
        last_fired_at=row["last_fired_at"],
    )


def schedule_list() -> Op[list[Schedule]]:
    """Every schedule, by name, with its next fire time."""
    rows = yield Read(Statement(queries.query("schedule_list")))
    return [_schedule(row) for row in rows]


def schedule_fire_due(*, now: float | None = None, limit: int = 100) -> Op[list[Fired]]:
    """Enqueue the due tick of every due schedule, each tick exactly once.

    Any number of processes may run this at once: a tick's row in
    schedule_fires (primary key schedule, fire_at) lets only the first batch
    that records it enqueue its job. After a gap, only the latest missed tick
    fires (or none, for catch_up="skip").
    """
    current = yield from _store_now(now)
    rows = yield Read(
        Statement(queries.query("schedule_due"), {"now": current, "limit": int(limit)}),
        Consistency.LINEARIZABLE,
    )
    fired: list[Fired] = []
    for schedule in map(_schedule, rows):
        decision = schedules.due(schedule.timing, schedule.next_fire_at, schedule.catch_up, current)
        batch = [_clock(current)]
        if decision.fire_at is not None:
            tick: dict[str, SqlValue] = {"name": schedule.name, "fire_at": decision.fire_at}
            keyed = {**tick, "key": f"schedule:{schedule.name}:{decision.fire_at:.6f}"}
            batch += [
                Statement(queries.query("schedule_fire_record"), tick),
                Statement(queries.query("schedule_fire_enqueue"), keyed),
                Statement(queries.query("schedule_fire_link"), keyed),
            ]
        batch.append(
            Statement(
                queries.query("schedule_advance"),
                {
                    "name": schedule.name,
                    "next_fire_at": decision.next_fire_at,
                    "fired_at": decision.fire_at,
                },
            )
        )
        results = yield Write(batch, idempotent=True)
        if decision.fire_at is not None and results[3].rows:
            job_id = results[3].rows[0]["job_id"]
            if job_id is not None:
                fired.append(Fired(schedule.name, decision.fire_at, int(job_id)))
    return fired
