"""The ``taskq`` command's parser and its error handling.

Errors are one line on stderr, ``taskq: error: ...``, with exit code 1 for
a runtime error (the store does not answer, no such job, the job failed)
and 2 for a usage or configuration error (a bad option, bad JSON, a bad
store URL or cron expression); nothing is written to the store then.
``taskq`` with no command prints its help, on stderr, and exits 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from taskq import __version__, errors
from taskq.cli import command

# The module of each command, in the order of the help. A run imports only its
# command's module: importing every one (the client, the rqlite and HTTP
# transports, the dev cluster) took most of each command's start, about 0.13 s
# of CPU of 0.16 s for `taskq jobs`. tests/unit/test_cli_command_modules.py
# holds this table to what each module adds.
COMMAND_MODULES: dict[str, str] = {
    "demo": "demo",
    **dict.fromkeys(["submit", "status", "result", "cancel", "retry", "jobs"], "jobs"),
    "logs": "logs",
    "functions": "functions",
    **dict.fromkeys(["queues", "pause", "resume", "limit", "submit-limit"], "queues"),
    "queue": "queue_defaults",
    "schedule": "schedules",
    **dict.fromkeys(["cluster", "workers", "stats"], "cluster"),
    **dict.fromkeys(["prune", "retention"], "retention"),
    **dict.fromkeys(["backup", "restore"], "backups"),
    "migrate": "migrate",
    "dev": "dev",
    "serve": "serve",
    "token": "tokens",
    "workflow": "workflows",
}


def build_parser(name: str | None = None) -> command.Parser:
    """The command line: global options and command ``name``'s module's commands, or every
    command when ``name`` is None or no command's (for the help, or to refuse it)."""
    parser = command.Parser(
        prog="taskq",
        description="taskq: a job queue on embedded SQLite or an rqlite cluster. "
        "'taskq demo' shows it at work; 'taskq COMMAND --help' explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"taskq {__version__}")
    command.add_store_options(parser, default=None)
    # Not required: given none, main prints the help, where argparse's refusal would only
    # say that a COMMAND is required, and not which there are.
    commands: command.Commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMAND_MODULES.get(name or "")
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        if wanted in (None, module):
            importlib.import_module(f"taskq.cli.{module}").add_commands(commands)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is neither an option nor the value
    of ``--store`` or ``--config`` (``taskq --store URL jobs``). A word taken wrongly (an
    abbreviated option's value) names no command, and the parser then has them all."""
    words = iter(argv)
    for word in words:
        if word in ("--store", "--config"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``taskq`` command; return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(command_named(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Refused by the command given, so that the error points to its own --help.
        refuse = getattr(args, "usage_error", parser.error)
        refuse(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return command.EXIT_USAGE
    try:
        code: int = args.handler(args)
    except errors.NotOverHttp as exc:
        # Raised before its request is sent: the command asked a taskq serve for what only
        # the store can do, and nothing was done.
        from taskq.cli import connection  # the command's module has imported it

        print(f"taskq: error: {connection.needs_the_store(args, str(exc))}", file=sys.stderr)
        return command.EXIT_USAGE
    except errors.IdempotencyConflict as exc:
        # Not a usage error: the key is taken by another request in this store.
        print(f"taskq: error: {exc}", file=sys.stderr)
        return command.EXIT_ERROR
    except (errors.ConfigError, errors.InvalidJob) as exc:
        print(f"taskq: error: {exc}", file=sys.stderr)
        return command.EXIT_USAGE
    except errors.TaskqError as exc:
        print(f"taskq: error: {exc}", file=sys.stderr)
        return command.EXIT_ERROR
    except KeyboardInterrupt:
        return command.EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (taskq jobs | head): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return command.EXIT_ERROR
    return code
