"""What every operation module shares: JSON in and out of rows, and the store's clock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from taskq import errors, fast_json
from taskq.broker.ops import queries
from taskq.broker.ops.plan import Op, Read
from taskq.broker.records import JOB_STATES, ParentResult
from taskq.broker.stores.store import Consistency, Statement

KEYSET_START = 2**62
"""The ``before`` of a listing's first page: larger than any row id."""

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


def from_json(text: Any) -> Any:
    """A JSON column's value; one the store already decoded passes through."""
    return fast_json.loads(text) if isinstance(text, str) else text


def parent_result(position: Any, job_id: Any, state: Any, result: Any, error: Any) -> ParentResult:
    """How a parent ended, from its stored columns (result and error as JSON text)."""
    return ParentResult(
        position=int(position),
        job_id=int(job_id),
        state=JOB_STATES[state],
        result=from_json(result),
        error=from_json(error),
    )


def ids_param(ids: Sequence[int]) -> str:
    """Job ids as the JSON array the statements read with ``json_each``."""
    return json.dumps([int(job_id) for job_id in ids])


def clock_tick(now: float | None) -> Statement:
    """The first statement of a batch that needs the time: see ``sql/queries/common.sql``."""
    return Statement(queries.query("clock_tick"), {"now": now})


def store_now(now: float | None) -> Op[float]:
    """``now`` if injected, else the store's clock (the leader's, on rqlite)."""
    if now is not None:
        return now
    rows = yield Read(Statement(queries.query("clock_read")), Consistency.WEAK)
    return float(rows[0]["now"])
