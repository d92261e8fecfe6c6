"""How long finished jobs are kept: ``taskq retention`` sets it, ``taskq prune`` applies it now."""

from __future__ import annotations

import argparse

from taskq.broker.client.client import KEEP, Keep
from taskq.broker.records import Retention
from taskq.cli import command, connection, output, values

_NEVER = "never"


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq prune`` and ``taskq retention``."""
    prune = command.add(
        commands,
        "prune",
        cmd_prune,
        help="delete finished jobs, their attempts and gone workers past the retention now",
        json=True,
    )
    prune.add_argument(
        "--older-than",
        type=values.seconds_with_unit,
        metavar="DURATION",
        help="every job finished longer ago than this, e.g. 12h, 7d "
        "(default: the store's retention, as maintenance prunes)",
    )
    retention = command.add(
        commands,
        "retention",
        cmd_retention,
        help="show or set how long the store keeps finished jobs before pruning them",
        description="Show or set how long finished jobs are kept before the workers' "
        "maintenance prunes them (with their attempts and output), for the whole store.\n\n"
        "  taskq retention                           # show it\n"
        "  taskq retention --succeeded 1d --failed 90d\n"
        "  taskq retention --failed never            # keep failures until 'taskq prune'",
        json=True,
    )
    retention.add_argument(
        "--succeeded",
        type=_retention_value,
        default=KEEP,
        metavar="DURATION|never",
        help="keep jobs that succeeded this long after they end",
    )
    retention.add_argument(
        "--failed",
        type=_retention_value,
        default=KEEP,
        metavar="DURATION|never",
        help="keep jobs that failed, died or were cancelled this long after they end",
    )


def _retention_value(text: str) -> float | None:
    """A duration (``30d``), or ``never``: kept until pruned by hand."""
    if text == _NEVER:
        return None
    try:
        return values.seconds_with_unit(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; or '{_NEVER}' to keep them") from None


def cmd_retention(args: argparse.Namespace) -> int:
    succeeded: float | Keep | None = args.succeeded
    failed: float | Keep | None = args.failed
    changing = succeeded is not KEEP or failed is not KEEP
    with connection.client(args, read_only=not changing) as client:
        if changing:
            retention = client.set_retention(succeeded=succeeded, failed=failed)
        else:
            retention = client.retention()
    if args.json:
        output.print_json(retention)
        return command.EXIT_OK
    print(f"succeeded jobs: {_kept(retention.succeeded_seconds)}")
    print(f"failed, dead and cancelled jobs: {_kept(retention.failed_seconds)}")
    return command.EXIT_OK


def _kept(seconds: float | None) -> str:
    if seconds is None:
        return "kept until pruned by hand (taskq prune --older-than)"
    return f"pruned {output.span(seconds)} after they end"


def cmd_prune(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        pruned = client.prune(older_than=args.older_than)
        retention = None if args.older_than is not None else client.retention()
    if args.json:
        output.print_json({"pruned": pruned, "older_than_seconds": args.older_than})
    else:
        print(f"pruned {pruned} finished job(s) {_past(args.older_than, retention)}")
    return command.EXIT_OK


def _past(older_than: float | None, retention: Retention | None) -> str:
    if older_than is not None or retention is None:
        return f"older than {output.span(older_than or 0)}"
    kinds = [
        f"{kind} {output.span(seconds) if seconds is not None else 'never'}"
        for kind, seconds in (
            ("succeeded", retention.succeeded_seconds),
            ("failed", retention.failed_seconds),
        )
    ]
    return f"past the store's retention ({', '.join(kinds)})"
