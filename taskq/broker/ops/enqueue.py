"""Enqueue: checking jobs, writing them once each, and the submit limits they spend."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from taskq import errors, fast_json
from taskq.broker import job_validation
from taskq.broker.ops import dependencies, queries
from taskq.broker.ops.common import clock_tick, to_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import JobSpec, PayloadKind
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement, StatementResult
from taskq.retry import parse_retry

MAX_PAYLOAD_BYTES = 1 << 20
"""The largest payload (a call's arguments, python_exec code) a job may carry, as JSON.

A queue is no place for data: a worker holds every payload it claims in
memory, and a huge one would slow every store read of the job. Pass a path
or a key instead; clients may set another bound.
"""


class PositionalKeys(msgspec.Struct, frozen=True):
    """Jobs keyed by their position in the request: job i's key is ``{prefix}/{i}``.

    A workflow's jobs are: the INSERT computes their keys (and gives them all
    ``fingerprint``, the workflow's), so their rows carry neither.
    """

    prefix: str
    fingerprint: str | None = None

    def key(self, position: int) -> str:
        return f"{self.prefix}/{position}"

    def params(self) -> dict[str, SqlValue]:
        """The parameters :func:`job_insert_sql` takes, ``positional``."""
        return {"key_prefix": self.prefix, "fingerprint": self.fingerprint}


@functools.cache
def job_insert_sql(
    specs_query: str, *, in_workflow: bool = False, positional: bool = False, returning: bool = True
) -> str:
    """The one INSERT of jobs, reading each job's fields from the block ``specs_query``.

    Enqueue reads them from its request, schedule firing from a due schedule.
    ``in_workflow``: the rows may also say a job's state, workflow and parents
    (:func:`taskq.broker.ops.dependencies.spec_fields`), and the statement takes
    a ``workflow_key`` parameter; jobs on their own keep the shorter statement.
    ``positional`` (with ``in_workflow``): the jobs are keyed by position
    (:class:`PositionalKeys`, whose ``params()`` it takes), and ``specs_query``
    gives each one's position as a column ``at``. ``returning``: the statement
    returns each new job's id and key; without it, one job's id is the
    statement's last insert id, if it inserted a row.
    """
    columns = values = ""
    if in_workflow:
        columns = ", " + queries.query("job_insert_workflow_columns")
        values = ",\n" + queries.query("job_insert_workflow_values")
    identity = "job_insert_positional_identity" if positional else "job_insert_own_identity"
    return queries.query("job_insert").format(
        specs=queries.query(specs_query),
        identity=queries.query(identity),
        workflow_columns=columns,
        workflow_values=values,
        returning=queries.query("job_insert_returning") if returning else "",
    )


def checked_row(
    spec: JobSpec, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES, identity: bool = True
) -> dict[str, Any]:
    """Check one job and return the row the enqueue statement reads; raises InvalidJob.

    The checks are :func:`taskq.broker.job_validation.check_spec`'s, then the
    payload's JSON and its size. Without ``identity`` the row leaves out the
    job's key and fingerprint (its key is its position: :class:`PositionalKeys`).
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
    row = {
        "queue": spec.queue,
        "kind": PayloadKind(spec.kind).value,
        "payload": payload,
        "priority": spec.priority,
        "run_at": spec.run_at,
        "delay": float(spec.delay),
        "max_attempts": spec.max_attempts,
        "timeout": spec.timeout,
        # Most jobs name no limits and no labels: their JSON needs no encoder.
        "limits": to_json(spec.limits, "limits") if spec.limits else "{}",
        "labels": to_json(sorted(set(spec.labels)), "labels") if spec.labels else "[]",
        "submitter": spec.submitter,
        "retry": None if spec.retry is None else parse_retry(spec.retry).to_dict(),
    }
    if identity:
        key = spec.idempotency_key
        row["key"] = auto_key() if key is None else key
        # Only a caller's own key can come back with another request: a random
        # one comes back only in a resend, so its job needs no fingerprint.
        row["fingerprint"] = None if key is None else job_validation.fingerprint(spec)
    return row


def auto_key() -> str:
    """The key of a job submitted without one: unique, and rising with time.

    A random key would go anywhere in the key index, and each submit would
    write a page of it that no recent one wrote; a rising one goes at its end,
    into the page the last one went to.
    """
    return f"auto:{time.time_ns():016x}{os.urandom(8).hex()}"


def _jobs(rate: float) -> str:
    """``1 job``, ``2 jobs``, ``0.5 jobs``: a rate as its refusal says it."""
    return f"{rate:g} job" if rate == 1 else f"{rate:g} jobs"


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
            f"submitter {submitter!r} may submit at most {_jobs(rate)} per {period:g} s; "
            f"{count} in one request can never fit: split it",
            None,
        )
    tokens = float(limit["tokens"]) if limit["tokens"] is not None else rate
    current = float(limit["now"]) if now is None else now
    elapsed = current - float(limit["updated_at"] or current)
    available = min(rate, tokens + elapsed * rate / period)
    retry_after = max(0.0, (count - available) * period / rate)
    return errors.RateLimited(
        f"submitter {submitter!r} may submit {_jobs(rate)} per {period:g} s; "
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

    A job with parents (``after``) waits until they have all ended (queued at
    once if they already have), and joins their workflow: they must all be in
    the same one, or all in none. A parent no job has (never submitted, or
    pruned) is refused, InvalidJob(field="after").
    """
    rows = [checked_row(spec, max_payload_bytes=max_payload_bytes) for spec in specs]
    if not rows:
        return []
    job_validation.check_keys_within([(row["key"], row["fingerprint"]) for row in rows])
    if not any(spec.after for spec in specs):
        ids, _ = yield from jobs_write(rows, now=now)
        return ids
    # A job whose own key is stored already is a resend (or a conflict, which the
    # write finds): its parents were checked when it was written, and one may have
    # joined a workflow (by a fan-out) or been pruned since.
    keyed = [
        row["key"]
        for spec, row in zip(specs, rows, strict=True)
        if spec.after and row["fingerprint"]
    ]
    stored = (
        {row["idempotency_key"] for row in (yield from _jobs_by_key(keyed))} if keyed else set()
    )
    new = [
        (spec, row)
        for spec, row in zip(specs, rows, strict=True)
        if spec.after and row["key"] not in stored
    ]
    parents = [parent for spec, _ in new for parent in spec.after]
    workflows = yield from dependencies.parent_workflows(parents)
    edges: list[dependencies.Edge] = []
    for spec, row in new:
        joined = {workflows[parent] for parent in spec.after}
        if len(joined) > 1:
            raise errors.InvalidJob(
                f"the parents {list(spec.after)} are in different workflows "
                f"({_workflows_named(workflows, spec.after)}): a job joins its "
                "parents' workflow, so they must share one, or all be in none",
                field="after",
            )
        row |= dependencies.spec_fields(
            parent_count=len(spec.after), run_anyway=spec.run_anyway, workflow_id=joined.pop()
        )
        edges += [(row["key"], at, None, parent) for at, parent in enumerate(spec.after)]
    after = dependencies.written_statements(edges, [row["key"] for _, row in new], parents)
    try:
        ids, _ = yield from jobs_write(rows, now=now, after=after, in_workflow=True)
        return ids
    except errors.ConstraintViolation as exc:
        # A parent pruned, or one that joined a workflow, since it was read.
        yield from dependencies.parent_workflows(parents)
        raise errors.InvalidJob(
            f"a parent of these jobs changed while they were written: {exc}", field="after"
        ) from exc


def jobs_write(
    rows: list[dict[str, Any]],
    *,
    now: float | None,
    before: Sequence[Statement] = (),
    after: Sequence[Statement] = (),
    in_workflow: bool = False,
    workflow_key: str | None = None,
    positional: PositionalKeys | None = None,
) -> Op[tuple[list[int], list[StatementResult]]]:
    """Write the checked ``rows`` in one request, spending their submitters' rates.

    The request is the clock's tick, ``before``, the rate spends, the jobs'
    INSERT (``job_insert_one`` for a lone job on its own, else
    :func:`job_insert_sql`, ``in_workflow`` with ``workflow_key``), then
    ``after``. A submitter over its rate is
    :class:`taskq.errors.RateLimited`, a key stored with another request
    :class:`taskq.errors.IdempotencyConflict`; a constraint that ``before``
    or ``after`` broke is raised as it is, its index counting from the tick
    (so ``before`` is 1 to ``len(before)``). Returns the jobs' ids in order,
    those of keys already stored read back, and what each statement of the
    write answered (the tick's first).

    ``positional``: the rows are keyed by position (they carry no key nor
    fingerprint, and ``in_workflow`` is implied).
    """
    if positional is None:
        keys = [row["key"] for row in rows]
    else:
        keys = [positional.key(at) for at in range(len(rows))]
    spends = _spends(rows, keys, positional)
    params: dict[str, SqlValue] = {"workflow_key": workflow_key} if in_workflow else {}
    if positional is not None:
        sql = job_insert_sql("job_enqueue_positional_specs", in_workflow=True, positional=True)
        params = {"workflow_key": workflow_key, "specs": fast_json.dumps_text(rows)}
        params |= positional.params()
    elif len(rows) == 1 and not in_workflow:
        # Its fields as parameters, and no RETURNING (whose table of rows cost a
        # single submit 7% of SQLite's work): on rqlite every node compiles the
        # statement for every request, and this one compiles fastest.
        sql = queries.query("job_insert_one")
        params = _one_job_params(rows[0])
    elif len(rows) == 1:
        sql = job_insert_sql("job_enqueue_spec", in_workflow=True, returning=False)
        params["spec"] = fast_json.dumps_text(rows[0])
    else:
        sql = job_insert_sql("job_enqueue_specs", in_workflow=in_workflow)
        params["specs"] = fast_json.dumps_text(rows)
    first_spend = 1 + len(before)
    inserted_at = first_spend + len(spends)
    batch = [
        clock_tick(now),
        *before,
        *(spend for _, _, spend in spends),
        Statement(sql, params),
        *after,
    ]
    try:
        results = yield Write(batch, idempotent=True)
    except errors.ConstraintViolation as exc:
        if first_spend <= exc.index < inserted_at:
            who, count = spends[exc.index - first_spend][:2]
            raise (yield from _rate_limited(who, count, now)) from exc
        if exc.index != inserted_at:
            raise
        if positional is None:
            fingerprints = {row["key"]: row["fingerprint"] for row in rows}
        else:
            fingerprints = dict.fromkeys(keys, positional.fingerprint)
        conflict = yield from _key_conflict(fingerprints, workflow_key)
        if conflict is None:
            raise exc
        raise conflict from exc
    inserted = results[inserted_at]
    if positional is None and len(rows) == 1:
        # A row inserted is this job's; none means its key was stored already.
        last = inserted.last_insert_id
        ids = {keys[0]: last} if inserted.rows_affected and last is not None else {}
    else:
        ids = {row["idempotency_key"]: int(row["id"]) for row in inserted.rows}
    missing = sorted(set(keys) - set(ids))
    if missing:
        found = yield from _jobs_by_key(missing)
        ids.update({row["idempotency_key"]: int(row["id"]) for row in found})
    return [ids[key] for key in keys], results


def _one_job_params(row: dict[str, Any]) -> dict[str, SqlValue]:
    """The parameters of ``job_insert_one``: the checked row's fields, its retry as JSON text.

    The text the spec's JSON would have given: its retry object as SQLite's
    ``json_extract`` writes it out, without spaces (the fast encoder's form).
    """
    params: dict[str, SqlValue] = dict(row)
    retry = row["retry"]
    params["retry"] = None if retry is None else fast_json.dumps_text(retry)
    return params


def _spends(
    rows: list[dict[str, Any]], keys: list[str], positional: PositionalKeys | None
) -> list[tuple[str, int, Statement]]:
    """Each submitter's spend of its rate on its jobs not stored yet: (who, jobs, statement)."""
    # Every value in the rows is checked (names, bounded numbers, finite floats, JSON
    # text the strict encoder wrote): the fast encoder writes what json would.
    if positional is None:
        keys_by_submitter: dict[str, list[str]] = {}
        for row, key in zip(rows, keys, strict=True):
            keys_by_submitter.setdefault(row["submitter"], []).append(key)
        return [
            (who, len(named), _keys_spend(who, named))
            for who, named in sorted(keys_by_submitter.items())
        ]
    # A workflow's jobs by their positions: a few bytes each, not a key's forty.
    at_by_submitter: dict[str, list[int]] = {}
    for at, row in enumerate(rows):
        at_by_submitter.setdefault(row["submitter"], []).append(at)
    sql = _spend_sql("submit_unstored_positions")
    return [
        (
            who,
            len(positions),
            Statement(
                sql,
                {
                    "submitter": who,
                    "key_prefix": positional.prefix,
                    "positions": fast_json.dumps_text(positions),
                },
            ),
        )
        for who, positions in sorted(at_by_submitter.items())
    ]


def _keys_spend(submitter: str, keys: list[str]) -> Statement:
    """The spend of ``submitter``'s rate on those of ``keys`` not stored yet."""
    if len(keys) == 1:
        # A single submit's: one key needs no JSON list, nor SQLite's json_each to read it.
        return Statement(
            _spend_sql("submit_unstored_key"), {"submitter": submitter, "key": keys[0]}
        )
    return Statement(
        _spend_sql("submit_unstored_keys"),
        {"submitter": submitter, "keys": fast_json.dumps_text(keys)},
    )


@functools.cache
def _spend_sql(unstored: str) -> str:
    return queries.query("submit_bucket_spend").format(unstored=queries.query(unstored))


def _jobs_by_key(keys: Sequence[str]) -> Op[list[Row]]:
    rows: list[Row] = yield Read(
        Statement(queries.query("job_by_key"), {"keys": json.dumps(list(keys))}),
        Consistency.LINEARIZABLE,
    )
    return rows


def _key_conflict(
    fingerprints: dict[str, str | None], workflow_key: str | None
) -> Op[errors.IdempotencyConflict | None]:
    """The error for a key stored with another request's fingerprint; None if none is now.

    ``workflow_key``: the new workflow's, whose jobs' keys the caller never wrote.
    """
    wanted = {key: digest for key, digest in fingerprints.items() if digest is not None}
    for stored in (yield from _jobs_by_key(sorted(wanted))):
        key, held = stored["idempotency_key"], stored["request_fingerprint"]
        if held is not None and held != wanted[key]:
            derived = (
                f" (the workflow key {workflow_key!r} keys its jobs "
                f"'{workflow_key}/0', '{workflow_key}/1', ...: give the workflow another key)"
                if workflow_key is not None
                else ""
            )
            return errors.IdempotencyConflict(
                f"idempotency key {key!r} already names job {stored['id']}, submitted with a "
                f"different request (function, arguments, queue or options){derived}; "
                "nothing was written",
                job_id=int(stored["id"]),
            )
    return None


def _workflows_named(workflows: dict[int, int | None], parents: Sequence[int]) -> str:
    """Where each of ``parents`` is: ``job 4 in workflow 3, job 9 in none``."""
    return ", ".join(
        f"job {parent} in "
        + ("none" if workflows[parent] is None else f"workflow {workflows[parent]}")
        for parent in parents
    )
