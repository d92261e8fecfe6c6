"""The store's retention of finished jobs: one for those that succeeded, one for the rest.

Kept in the store (one row of ``retention``), not in each worker's settings:
whichever worker holds the maintenance lease prunes by the same figures
(``maintenance.Pruner``), and they outlive any one worker's restart. A lab
keeps its failures for a post-mortem long after the routine successes are
gone; None keeps a kind until ``taskq prune`` deletes it by hand.
"""

from __future__ import annotations

import math

from taskq import errors
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.ops.queues import KEEP, Keep
from taskq.broker.records import Retention
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement


def retention_get() -> Op[Retention]:
    """How long the store keeps finished jobs."""
    rows = yield Read(Statement(queries.query("retention_get")), Consistency.WEAK)
    return _retention(rows[0])


def retention_set(
    *,
    succeeded_seconds: float | Keep | None = KEEP,
    failed_seconds: float | Keep | None = KEEP,
    now: float | None = None,
) -> Op[Retention]:
    """Set either retention (seconds; None: kept until pruned by hand; one not
    given, ``KEEP``, stays); the store's now.

    ``InvalidSetting`` names a figure that is not a positive number of
    seconds, and nothing is written.
    """
    params: dict[str, SqlValue] = {}
    for name, value in (("succeeded", succeeded_seconds), ("failed", failed_seconds)):
        params[f"set_{name}"] = int(value is not KEEP)
        params[name] = None if value is KEEP else checked(name, value)
    results = yield Write(
        [clock_tick(now), Statement(queries.query("retention_set"), params)], idempotent=True
    )
    return _retention(results[1].rows[0])


def checked(name: str, seconds: object) -> float | None:
    """``seconds`` as the ``name`` (``succeeded``, ``failed``) retention, or InvalidSetting."""
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise errors.InvalidSetting(
            f"the {name} jobs' retention must be a positive number of seconds, "
            f"or None to keep them until pruned by hand; got {seconds!r}",
            field=f"{name}_seconds",
        )
    return float(seconds)


def _retention(row: Row) -> Retention:
    succeeded, failed = row["succeeded_seconds"], row["failed_seconds"]
    return Retention(
        succeeded_seconds=None if succeeded is None else float(succeeded),
        failed_seconds=None if failed is None else float(failed),
    )
