"""``taskq schedule``: periodic jobs by cron expression or fixed interval, in a time zone."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from taskq import errors
from taskq.broker import schedule_timing
from taskq.broker.client.client import NamedCall, Schedule
from taskq.broker.job_validation import check_target
from taskq.cli import command, connection, job_options, output, undeclared, values

# The parts of a stored schedule's job that the broker keeps as JSON text.
_JSON_FIELDS = ("payload", "limits", "labels")


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq schedule`` and its subcommands."""
    actions = command.add_group(
        commands,
        "schedule",
        help="periodic jobs: add, list, remove, pause, resume",
        description="Periodic jobs. Each tick is enqueued exactly once, however many workers\n"
        "run the scheduler; after downtime the latest missed tick fires once.\n\n"
        "  taskq schedule add nightly --cron '0 3 * * *' mypkg.backup:run --timezone UTC\n"
        "  taskq schedule add poll --every 10m mypkg.feeds:poll '\"https://example.org\"'\n"
        "  taskq schedule list",
        dest="schedule_command",
    )

    add = command.add(
        actions, "add", cmd_add, help="create a schedule (or replace one: --replace)", json=True
    )
    add.add_argument("name", help="schedule name: letters, digits, '_', '.', ':' or '-'")
    timing = add.add_mutually_exclusive_group(required=True)
    timing.add_argument(
        "--cron", metavar="EXPR", help="five-field cron expression, e.g. '0 9 * * 1-5'"
    )
    timing.add_argument(
        "--every", type=values.seconds, metavar="DURATION", help="fixed interval, e.g. 30s, 10m, 1h"
    )
    job_options.add_call_arguments(add)
    job_options.add_job_options(add)
    add.add_argument(
        "--timezone",
        default=local_zone(),
        metavar="ZONE",
        help="IANA zone the cron expression is read in (default: this machine's, %(default)s)",
    )
    add.add_argument(
        "--skip-missed",
        action="store_true",
        help="after downtime, fire no missed tick (default: the latest one fires once)",
    )
    add.add_argument(
        "--unchecked",
        action="store_true",
        help="schedule pkg.mod:func even though no worker has declared it (for workers yet to "
        "start); its options are then only those given. Without it, the declared options are "
        "read now and every tick enqueues them",
    )
    add.add_argument(
        "--replace",
        action="store_true",
        help="replace the schedule of this name if there is one (without it, a taken name "
        "is an error unless the schedule is exactly as given)",
    )

    command.add(actions, "list", cmd_list, help="every schedule and its next fire time", json=True)
    for name, handler, text in (
        ("remove", cmd_remove, "delete a schedule"),
        ("pause", cmd_pause, "pause a schedule: no ticks fire until resumed"),
        ("resume", cmd_resume, "resume a paused schedule"),
    ):
        parser = command.add(actions, name, handler, help=text)
        parser.add_argument("name", help="schedule name")


def local_zone() -> str:
    """This machine's IANA time zone name (from TZ or /etc/localtime), else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        link = os.readlink("/etc/localtime")
    except OSError:
        link = ""
    candidates.append(link.partition("zoneinfo/")[2])
    for name in candidates:
        if not name:
            continue
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            continue
        return name
    return "UTC"


def describe(schedule: Schedule) -> str:
    """When the schedule fires, in words."""
    if schedule.timing.every_seconds is not None:
        return f"every {output.span(schedule.timing.every_seconds)}"
    return schedule_timing.describe(schedule.timing)


def _job(schedule: Schedule) -> dict[str, Any]:
    spec = dict(schedule.spec)
    for field in _JSON_FIELDS:
        if isinstance(spec.get(field), str):
            spec[field] = json.loads(spec[field])
    return spec


def _as_json(schedule: Schedule) -> dict[str, Any]:
    data: dict[str, Any] = output.plain(schedule)
    data["spec"] = _job(schedule)
    data["description"] = describe(schedule)
    return data


def _next(schedule: Schedule) -> str:
    """When the next tick fires, in this machine's time (a paused schedule fires none)."""
    if schedule.paused:
        return "- (paused)"
    return f"{output.local_time(schedule.next_fire_at)} ({output.relative(schedule.next_fire_at)})"


def cmd_add(args: argparse.Namespace) -> int:
    given = {**job_options.given_options(args), "kwargs": args.kwargs}
    url = connection.named_url(args)
    if not args.unchecked:
        check_target(args.target)  # a malformed name is told as such first
        undeclared.refuse_in_new_store(url, args.target)
    with (
        connection.client_at(url, config=args.config) as client,
        undeclared.store_named_in_refusal(client, url, args.target),
    ):
        added = client.add_schedule(
            args.name,
            NamedCall(args.target, args.args, given),
            unchecked=args.unchecked,
            cron=args.cron,
            every_seconds=args.every,
            timezone=args.timezone,
            catch_up=schedule_timing.CatchUp.SKIP
            if args.skip_missed
            else schedule_timing.CatchUp.ONCE,
            replace=args.replace,
        )
    schedule = added.schedule
    if args.json:
        output.print_json({**_as_json(schedule), "replaced": added.replaced})
    else:
        done = " replaced" if added.replaced else ""
        print(
            f"schedule {schedule.name}{done}: {describe(schedule)}; "
            f"next run {_next(schedule)}, this machine's time"
        )
    return command.EXIT_OK


# A tick fires within a maintenance round of its time; past this, it waits for a worker.
_OVERDUE_SECONDS = 10.0


def cmd_list(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        found = client.schedules()
        due_by = time.time() - _OVERDUE_SECONDS
        overdue = [s.name for s in found if not s.paused and s.next_fire_at < due_by]
        if overdue and not client.served_queues():
            # Live workers fire the schedules: with none, a past next run only waits.
            its = "is past its" if len(overdue) == 1 else "are past their"
            output.warn(
                f"note: {', '.join(overdue)} {its} next run: no live worker fires "
                "schedules (start one: taskq-worker)"
            )
    if args.json:
        output.print_json([_as_json(schedule) for schedule in found])
        return command.EXIT_OK
    if not found:
        print("no schedules")
        return command.EXIT_OK
    rows = []
    for schedule in found:
        job = _job(schedule)
        rows.append(
            (
                schedule.name,
                "paused" if schedule.paused else "active",
                describe(schedule),
                _next(schedule),
                output.one_line(output.call_text(job["kind"], job["payload"]), 40),
                job["queue"],
                output.local_time(schedule.last_fired_at),
            )
        )
    header = ("NAME", "STATE", "WHEN", "NEXT RUN (LOCAL)", "CALL", "QUEUE", "LAST RUN")
    output.print_table(header, rows)
    return command.EXIT_OK


def _require(found: bool, name: str) -> None:
    if not found:
        raise errors.TaskqError(f"no schedule named {name!r}")


def cmd_remove(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        _require(client.remove_schedule(args.name), args.name)
    print(f"schedule {args.name} removed")
    return command.EXIT_OK


def cmd_pause(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        _require(client.pause_schedule(args.name), args.name)
    print(f"schedule {args.name} paused")
    return command.EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        _require(client.resume_schedule(args.name), args.name)
    print(f"schedule {args.name} resumed")
    return command.EXIT_OK
