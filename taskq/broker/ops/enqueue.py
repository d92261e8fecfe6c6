"""Enqueue: checking jobs, writing them once each, and the submit limits they spend."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from taskq import errors, fast_json
from taskq.broker import job_validation
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, to_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import JobSpec, PayloadKind
from taskq.broker.stores.store import Consistency, Row, Statement
from taskq.retry import parse_retry

MAX_PAYLOAD_BYTES = 1 << 20
"""The largest payload (a call's arguments, python_exec code) a job may carry, as JSON.

A queue is no place for data: a worker holds every payload it claims in
memory, and a huge one would slow every store read of the job. Pass a path
or a key instead; clients may set another bound.
"""


@functools.cache
def job_insert_sql(specs_query: str) -> str:
    """The one INSERT of jobs, reading each job's fields from the block ``specs_query``.

    Enqueue reads them from its request, schedule firing from a due schedule.
    """
    return queries.query("job_insert").format(specs=queries.query(specs_query))


def checked_row(spec: JobSpec, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> dict[str, Any]:
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
        # Most jobs name no limits and no labels: their JSON needs no encoder.
        "limits": to_json(spec.limits, "limits") if spec.limits else "{}",
        "labels": to_json(sorted(set(spec.labels)), "labels") if spec.labels else "[]",
        "key": auto_key() if key is None else key,
        # Only a caller's own key can come back with another request: a random
        # one comes back only in a resend, so its job needs no fingerprint.
        "fingerprint": None if key is None else job_validation.fingerprint(spec),
        "submitter": spec.submitter,
        "retry": None if spec.retry is None else parse_retry(spec.retry).to_dict(),
    }


def auto_key() -> str:
    """The key of a job submitted without one: unique, and rising with time.

    A random key would go anywhere in the key index, and each submit would
    write a page of it that no recent one wrote; a rising one goes at its end,
    into the page the last one went to.
    """
    return f"auto:{time.time_ns():016x}{os.urandom(8).hex()}"


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
    rows = [checked_row(spec, max_payload_bytes=max_payload_bytes) for spec in specs]
    if not rows:
        return []
    job_validation.check_keys_within([(row["key"], row["fingerprint"]) for row in rows])
    keys_by_submitter: dict[str, list[str]] = {}
    for row in rows:
        keys_by_submitter.setdefault(row["submitter"], []).append(row["key"])
    per_submitter = sorted(keys_by_submitter.items())
    # Every value in the rows is checked (names, bounded numbers, finite floats, JSON
    # text the strict encoder wrote): the fast encoder writes what json would.
    spends = [
        Statement(
            queries.query("submit_bucket_spend"),
            {"submitter": who, "keys": fast_json.dumps_text(keys)},
        )
        for who, keys in per_submitter
    ]
    if len(rows) == 1:
        statement = Statement(
            job_insert_sql("job_enqueue_spec"), {"spec": fast_json.dumps_text(rows[0])}
        )
    else:
        statement = Statement(
            job_insert_sql("job_enqueue_specs"), {"specs": fast_json.dumps_text(rows)}
        )
    try:
        results = yield Write([clock_tick(now), *spends, statement], idempotent=True)
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
