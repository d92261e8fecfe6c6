"""The ``taskq`` command's parser and its error handling.

Errors are one line on stderr, ``taskq: error: ...``, with exit code 1 for
a runtime error (the store does not answer, no such job, the job failed)
and 2 for a usage or configuration error (a bad option, bad JSON, a bad
store URL or cron expression); nothing is written to the store then.
``taskq`` with no command prints its help, on stderr, and exits 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from taskq import __version__, errors
from taskq.cli import (
    backups,
    cluster,
    command,
    connection,
    demo,
    dev,
    functions,
    jobs,
    logs,
    migrate,
    queue_defaults,
    queues,
    retention,
    schedules,
    serve,
    tokens,
    workflows,
)


def build_parser() -> command.Parser:
    """The whole command line: global options and every subcommand."""
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
    demo.add_commands(commands)
    jobs.add_commands(commands)
    logs.add_commands(commands)
    functions.add_commands(commands)
    queues.add_commands(commands)
    queue_defaults.add_commands(commands)
    schedules.add_commands(commands)
    cluster.add_commands(commands)
    retention.add_commands(commands)
    backups.add_commands(commands)
    migrate.add_commands(commands)
    dev.add_commands(commands)
    serve.add_commands(commands)
    tokens.add_commands(commands)
    workflows.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``taskq`` command; return its exit code."""
    parser = build_parser()
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
