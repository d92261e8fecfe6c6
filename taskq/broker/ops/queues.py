"""Queues and submitters: pauses, cluster-wide limits, counts, and submit rate limits."""

from __future__ import annotations

import enum
import math
from typing import Any

import msgspec

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json, to_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import JobSpec, JobState, PayloadKind, QueueStats
from taskq.broker.stores.store import SqlValue, Statement
from taskq.retry import RetryPolicy, parse_retry

# -- queues -----------------------------------------------------------------------


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
    action = "pause it" if paused else "resume it"
    yield from _set_settings(
        queue,
        Statement(queries.query("queue_set_paused"), params),
        action,
        create=create,
        now=now,
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
    create: bool = False,
    now: float | None = None,
) -> Op[None]:
    """Cap a queue cluster-wide: ``max_running`` jobs at once, ``rate_limit`` starts per period.

    ``None`` lifts a limit; a limit not given (``KEEP``) stays as the store
    has it, in the same statement, so two people changing different limits
    at once do not undo each other. A new rate starts with a full bucket. The
    caps are applied by every claim, in the store. A queue without jobs or
    settings is refused (a misspelt name), unless ``create``; one whose
    settings are all lifted, and that has no jobs, is gone.
    """
    job_validation.check_name(queue, "queue")
    if isinstance(max_running, int) and not job_validation.MAX_RUNNING.admits(max_running):
        raise errors.InvalidSetting(
            f"max_running must be from 0 to {job_validation.MAX_RUNNING.high:.0f}, "
            f"got {max_running}",
            field="max_running",
        )
    if isinstance(rate_limit, int | float) and not (
        math.isfinite(rate_limit) and job_validation.RATE_LIMIT.admits(rate_limit)
    ):
        raise errors.InvalidSetting(
            f"rate limit must be a positive number, got {rate_limit}", field="rate_limit"
        )
    if not (math.isfinite(rate_period) and job_validation.RATE_PERIOD.admits(rate_period)):
        raise errors.InvalidSetting(
            f"rate period must be positive seconds, got {rate_period}", field="rate_period"
        )
    rate = None if rate_limit is KEEP else rate_limit
    yield from _set_settings(
        queue,
        Statement(
            queries.query("queue_set_limits"),
            {
                "queue": queue,
                "create": int(create),
                "set_max_running": int(max_running is not KEEP),
                "max_running": None if max_running is KEEP else max_running,
                "set_rate": int(rate_limit is not KEEP),
                "rate_limit": rate,
                "rate_period": rate_period if rate is not None else None,
            },
        ),
        "set its limits",
        create=create,
        now=now,
    )


def _set_settings(
    queue: str, change: Statement, what: str, *, create: bool, now: float | None
) -> Op[None]:
    """Write ``change`` to an existing queue's settings (or QueueNotFound; ``create``: to
    any), then drop the row of a queue left with none, unless it was just created."""
    results = yield Write(
        [
            clock_tick(now),
            change,
            Statement(queries.query("queue_defaults_tidy"), {"queue": queue}),
            Statement(
                queries.query("queue_settings_forget"),
                {"queue": queue, "create": int(create)},
            ),
        ],
        idempotent=True,
    )
    if not results[1].rows:
        raise errors.QueueNotFound.not_created(queue, what, "--create, create=True")


def queue_set_defaults(
    queue: str,
    *,
    timeout: float | Keep | None = KEEP,
    max_attempts: int | Keep | None = KEEP,
    limits: dict[str, Any] | Keep | None = KEEP,
    retry: RetryPolicy | dict[str, Any] | Keep | None = KEEP,
    create: bool = False,
    now: float | None = None,
) -> Op[None]:
    """Set what a job of ``queue`` gets when it says none, applied by every enqueue.

    ``None`` lifts a default; one not given (``KEEP``) stays as the store has
    it. ``limits`` are merged name by name into the queue's (a limit given
    as None is lifted), and a job's own limits are laid over them in turn.
    Each value is checked as a job's own would be: a bad one raises
    InvalidJob naming it, and nothing is written. A queue without jobs or
    settings is refused unless ``create``, as in :func:`queue_set_limits`.
    """
    given = {
        name: value
        for name, value in (
            ("timeout", timeout),
            ("max_attempts", max_attempts),
            ("limits", limits),
            ("retry", retry),
        )
        if value is not KEEP
    }
    if isinstance(given.get("retry"), RetryPolicy | dict):
        given["retry"] = parse_retry(given["retry"]).to_dict()
    probe: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if isinstance(probe.get("limits"), dict):
        probe["limits"] = {k: v for k, v in probe["limits"].items() if v is not None}
    # The very checks a job's own values get at enqueue.
    job_validation.check_spec(
        JobSpec(PayloadKind.CALL, {"target": "m:f", "args": [], "kwargs": {}}, queue, **probe)
    )
    yield from _set_settings(
        queue,
        Statement(
            queries.query("queue_set_defaults"),
            {"queue": queue, "create": int(create), "changes": to_json(given, "queue defaults")},
        ),
        "set its defaults",
        create=create,
        now=now,
    )


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
            job_defaults=from_json(settings.get(name, {}).get("job_defaults")) or {},
        )
        for name in sorted(by_queue)
    ]


# -- submitters -------------------------------------------------------------------


class SubmitLimit(msgspec.Struct, frozen=True):
    """At most ``rate`` submissions per ``period`` seconds ("*": everyone without their own)."""

    submitter: str
    rate: float
    period: float


def submit_limit_set(submitter: str, rate: float, period: float) -> Op[None]:
    """Limit a submitter's (or, with "*", everyone's) submission rate."""
    # A name no job's submitter can have would limit nobody.
    job_validation.check_name(submitter, "submitter", empty_allowed=True)
    rate_ok = math.isfinite(rate) and job_validation.SUBMIT_RATE.admits(rate)
    if not (rate_ok and math.isfinite(period) and job_validation.SUBMIT_PERIOD.admits(period)):
        raise errors.InvalidSetting(
            f"a submit limit needs a positive rate and period, got {rate}/{period}",
            field="period" if rate_ok else "rate",
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
