"""The parts every ``taskq`` subcommand is built from: the parser, exit codes, common options.

A usage error is one line on stderr and exit 2, like every other error of
the command, rather than argparse's usage block.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TypeAlias

from taskq.one_line_parser import EXIT_USAGE as EXIT_USAGE
from taskq.one_line_parser import OneLineParser

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130

Handler: TypeAlias = Callable[[argparse.Namespace], int]
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"

STORE_HELP = (
    "store URL (sqlite:///file.db or rqlite://host:port,...), or a taskq serve's "
    "(http(s)://host:port, its token in TASKQ_TOKEN); "
    "default: TASKQ_STORE, the config file, then a file in your data directory"
)
CONFIG_HELP = "config file (default: TASKQ_CONFIG or the user one)"
# The largest id a store holds (SQLite's INTEGER).
_MAX_ID = 2**63 - 1


# A value that starts with a dash and a digit or point: a negative quantity (-5m, -1.5h, -.5).
_NEGATIVE = re.compile(r"-[0-9.]")


class Parser(OneLineParser):
    """An argument parser whose errors are one line: ``taskq: error: ...``.

    An option's value may start with a dash, as a negative duration does:
    ``--delay -5m`` is read as ``--delay=-5m``, so that the value's own check
    refuses it, saying why, as it refuses ``--delay=-5m``.
    """

    def _prepared(self, given: list[str]) -> list[str]:
        return self._values_attached(given)

    def _values_attached(self, given: list[str]) -> list[str]:
        """``given`` with each option that takes one value joined to a negative-looking value."""
        # argparse reads a value that starts with a dash, unless it is a plain negative
        # number, as an option of its own, and refuses the option as given no value
        # (Python's bpo-9334). It has no public list of a parser's options: the
        # mapping below, which its argument groups share, is the one it parses by.
        options = self._option_string_actions
        attached: list[str] = []
        rest = iter(given)
        for arg in rest:
            if arg == "--":  # the end of options: the rest are positional, as given
                attached += [arg, *rest]
                break
            action = options.get(arg)
            takes_one = action is not None and action.nargs is None
            if takes_one and (value := next(rest, None)) is not None:
                attached += [f"{arg}={value}"] if _NEGATIVE.match(value) else [arg, value]
            else:
                attached.append(arg)
        return attached


def id_reader(kind: str) -> Callable[[str], int]:
    """How argparse reads the id of a ``kind`` (``job``, ``workflow``): a whole number a
    store can hold. A mistyped id is refused in words that say what an id is, where
    argparse's would be "invalid int value"; so is one out of range, before a store is asked."""

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {kind} id (a whole number)"
            ) from None
        if not 1 <= value <= _MAX_ID:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind} id (from 1 to {_MAX_ID})")
        return value

    return read


a_job_id = id_reader("job")
a_workflow_id = id_reader("workflow")


def add_store_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """``--store`` and ``--config``; a subcommand's take ``argparse.SUPPRESS`` as default.

    So both ``taskq --store URL jobs`` and ``taskq jobs --store URL`` work.
    """
    parser.add_argument("--store", default=default, help=STORE_HELP)
    parser.add_argument("--config", default=default, help=CONFIG_HELP)


def add(
    commands: Commands,
    name: str,
    handler: Handler,
    *,
    help: str,
    description: str | None = None,
    json: bool = False,
) -> Parser:
    """A subcommand that runs ``handler``; ``json`` adds ``--json``."""
    parser = commands.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_options(parser, default=argparse.SUPPRESS)
    if json:
        parser.add_argument("--json", action="store_true", help="print JSON (stable keys)")
    # usage_error: the command's own refusal, naming its --help (a usage error found after
    # parsing, or an argument it does not take); command_name: the command as typed, for a
    # refusal that names it ("taskq queue set").
    parser.set_defaults(handler=handler, usage_error=parser.error, command_name=parser.prog)
    return parser


def add_group(commands: Commands, name: str, *, help: str, description: str, dest: str) -> Commands:
    """A command with actions of its own (``taskq NAME ACTION``), each taking the store options."""
    group = commands.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_options(group, default=argparse.SUPPRESS)
    actions: Commands = group.add_subparsers(dest=dest, required=True, metavar="ACTION")
    return actions
