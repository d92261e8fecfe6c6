"""``taskq backup`` and ``taskq restore``: a store into one SQLite file, and into a new store."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from taskq import errors, humanize
from taskq.broker.client import backups
from taskq.cli import command, connection

_COMMANDS = (
    (
        "backup",
        "copy the store, while workers go on, into a new SQLite file",
        "Copy the store into FILE (a new SQLite file) as of one moment, while workers go on "
        "writing: SQLite's online backup for a file, rqlite's /db/backup for a cluster. The "
        "copy is checked before it takes the name FILE.",
        "the backup file to make (must not exist)",
    ),
    (
        "restore",
        "restore a backup into a new store (a new file, or an empty cluster)",
        "Check FILE (a taskq backup) and restore it into the store named by --store, which "
        "must be new: a SQLite file that does not exist yet, or an rqlite cluster that holds "
        "nothing. A store that holds anything is refused, unchanged.",
        "a file made by 'taskq backup'",
    ),
)


def add_commands(commands: command.Commands) -> None:
    """Register ``backup`` and ``restore``."""
    handlers = {"backup": cmd_backup, "restore": cmd_restore}
    for name, summary, description, file_help in _COMMANDS:
        parser = command.add(commands, name, handlers[name], help=summary, description=description)
        parser.add_argument("file", metavar="FILE", help=file_help)
        parser.add_argument(
            "--json", action="store_true", help="print progress as JSON lines (one object a line)"
        )


def cmd_backup(args: argparse.Namespace) -> int:
    stamped = Path(args.file).expanduser() / f"taskq-{time.strftime('%Y-%m-%d')}.db"
    _refuse_a_directory(args.file, f"name the backup file to make in it, e.g. {stamped}")
    with _cleaned_up_on_sigterm():
        backups.backup(args.file, connection.store_url(args), on_progress=_printer(args.json))
    return command.EXIT_OK


def _refuse_a_directory(file: str, advice: str) -> None:
    """Refuse FILE when it is a directory, as ``cp x /backups/`` would take it, before
    anything else: the backup's own check would call it taken ("remove it") or missing."""
    if Path(file).expanduser().is_dir():
        raise errors.ConfigError(f"{file} is a directory: {advice}")


def cmd_restore(args: argparse.Namespace) -> int:
    _refuse_a_directory(args.file, "name the file in it that 'taskq backup' made")
    with _cleaned_up_on_sigterm():
        restored = backups.restore(
            args.file, connection.store_url(args), on_progress=_printer(args.json)
        )
    if restored.behind and not args.json:
        # Else the next 'taskq jobs' is the first word of it, as a refusal.
        print(
            f"the restored store's schema version {restored.schema_version} is behind this taskq's "
            f"({restored.known_version}): 'taskq migrate' brings it up to date; until then "
            "commands that only read refuse it"
        )
    return command.EXIT_OK


@contextlib.contextmanager
def _cleaned_up_on_sigterm() -> Iterator[None]:
    """SIGTERM (a cron job's timeout, say) ends the command as Ctrl-C does: by an exception,
    so that the half-written copy beside the target is removed on the way out. Python's
    default would end the process where it stands and leave the copy behind."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _printer(as_json: bool) -> backups.Progress:
    def show(event: dict[str, Any]) -> None:
        if as_json:
            print(json.dumps(event), flush=True)
            return
        line = _line(event)
        if line:
            print(line, flush=True)

    return show


def _line(event: dict[str, Any]) -> str:
    kind = event["event"]
    if kind == "backup_started":
        return f"backing up {event['store']} into {event['file']}"
    if kind == "restore_started":
        return f"restoring {event['file']} into {event['store']}"
    if kind == "restore_checked":
        lost = event.get("workers_lost", 0)
        # Else the restored store would count the source's workers as serving its queues.
        marked = f" ({lost} of them live there: lost here until heard on this store)"
        return f"checked: {_held(event)}" + (marked if lost else "")
    if kind == "restore_loading":
        return f"loading {humanize.size(event['bytes'])} into the cluster"
    if kind == "backup_done":
        return (
            f"backed up: {event['file']}, {humanize.size(event['bytes'])}, {_held(event)}, "
            f"in {event['seconds']:.1f} s"
        )
    if kind == "restore_done":
        return f"restored: {event['store']}, {_held(event)}, in {event['seconds']:.1f} s"
    return ""


def _held(event: dict[str, Any]) -> str:
    states = ", ".join(f"{state} {n}" for state, n in sorted(event["jobs_by_state"].items()))
    return (
        f"schema version {event['schema_version']}, {event['jobs']} job(s)"
        + (f" ({states})" if states else "")
        + f", {event['workers']} worker(s) registered"
    )
