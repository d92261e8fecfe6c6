"""Periodic jobs: the operations that store and fire them.

When a schedule is due is :mod:`taskq.broker.schedule_timing`'s to say. A
fired tick enqueues its job through the one job INSERT of
:mod:`taskq.broker.ops.enqueue`; the SQL is in ``sql/queries/schedules.sql``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from taskq import errors
from taskq.broker.ops import queries
from taskq.broker.ops.common import clock_tick, from_json, store_now, to_json
from taskq.broker.ops.enqueue import checked_row, job_insert_sql
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import JobSpec
from taskq.broker.schedule_timing import (
    CatchUp,
    Timing,
    due,
    next_tick,
    validate_name,
    validate_timing,
)
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement

# The members of a job's row that it keeps as JSON text: a schedule's job
# is read with them decoded, as a job is.
_JSON_MEMBERS = ("payload", "limits", "labels")


class Schedule(msgspec.Struct, frozen=True):
    """A periodic job as stored."""

    name: str
    timing: Timing
    spec: Annotated[
        dict[str, Any],
        msgspec.Meta(
            description="The job each tick enqueues: queue, payload, options, limits, labels.",
            extra_json_schema={
                "properties": {
                    "payload": {"type": "object"},
                    "limits": {"type": "object"},
                    "labels": {"type": "array", "items": {"type": "string"}},
                }
            },
        ),
    ]
    paused: bool
    catch_up: CatchUp
    next_fire_at: float
    last_fired_at: float | None


class Fired(msgspec.Struct, frozen=True):
    """A tick that a round enqueued."""

    schedule: str
    fire_at: float
    job_id: int


class ScheduleAdded(msgspec.Struct, frozen=True):
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
    catch_up: CatchUp = CatchUp.ONCE,
    replace: bool = False,
    now: float | None = None,
) -> Op[ScheduleAdded]:
    """Create the schedule ``name``, which enqueues ``spec`` on every tick.

    A schedule of that name is replaced (keeping its pause) only when
    ``replace`` says so; otherwise the name being taken is an error, unless
    by this very schedule: adding it exactly as it stands changes nothing, so
    a set-up script may run twice, and a resent request finds its own work.
    """
    validate_name(name)
    row = checked_row(spec)
    for one_off in ("key", "fingerprint", "run_at", "delay", "submitter"):
        row.pop(one_off)
    current = yield from store_now(now)
    timing = validate_timing(
        cron=cron, every_seconds=every_seconds, timezone=timezone, anchor=current
    )
    definition: dict[str, SqlValue] = {
        "name": name,
        "cron": cron,
        "every_seconds": every_seconds,
        "timezone": timezone,
        "spec": to_json(row, "the job"),
        "catch_up": CatchUp(catch_up).value,
    }
    values: dict[str, SqlValue] = {**definition, "next_fire_at": next_tick(timing, current)}
    batch = [clock_tick(current)]
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
    raise errors.ScheduleExists.taken(name, "taskq schedule add --replace, replace=True")


def schedule_remove(name: str) -> Op[bool]:
    """Delete a schedule; False when there was none of that name."""
    results = yield Write(
        [
            Statement(queries.query("schedule_delete"), {"name": name}),
            # Its ticks' records go with it: one added again by that name starts afresh.
            Statement(queries.query("schedule_fires_forget"), {"name": name}),
        ],
        idempotent=True,
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
        timing=Timing(
            cron=row["cron"],
            every_seconds=row["every_seconds"],
            timezone=row["timezone"],
            anchor=float(row["created_at"]),
        ),
        spec=_job_of(row["spec"]),
        paused=bool(row["paused"]),
        catch_up=CatchUp(row["catch_up"]),
        next_fire_at=float(row["next_fire_at"]),
        last_fired_at=row["last_fired_at"],
    )


def _job_of(stored: str) -> dict[str, Any]:
    spec: dict[str, Any] = from_json(stored)
    # A schedule stored before a member existed has none.
    return {**spec, **{key: from_json(spec[key]) for key in _JSON_MEMBERS if key in spec}}


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
    current = yield from store_now(now)
    rows = yield Read(
        Statement(queries.query("schedule_due"), {"now": current, "limit": int(limit)}),
        Consistency.LINEARIZABLE,
    )
    fired: list[Fired] = []
    for schedule in map(_schedule, rows):
        decision = due(schedule.timing, schedule.next_fire_at, schedule.catch_up, current)
        batch = [clock_tick(current)]
        if decision.fire_at is not None:
            tick: dict[str, SqlValue] = {"name": schedule.name, "fire_at": decision.fire_at}
            keyed = {**tick, "key": f"schedule:{schedule.name}:{decision.fire_at:.6f}"}
            batch += [
                Statement(queries.query("schedule_fire_record"), tick),
                Statement(job_insert_sql("schedule_fire_spec"), keyed),
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
