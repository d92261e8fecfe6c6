"""An argument parser whose errors are one line, for every taskq command.

argparse prints a command's whole usage above its complaint; for
``taskq-worker``, with its many flags, that is a screen. Each command says
instead ``PROGRAM: error: MESSAGE (see 'PROGRAM --help')``, as it says its
other errors, and exits 2. An option the command does not take is named
with the closest one it does (``--sate``: did you mean ``--state``?), as
argparse 3.11 does not, and so is a command (``taskq sumbit``: did you mean
``submit``?). An option is given whole: ``--stat`` is refused, not read as
``--state``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, TypeVar, overload

from taskq.close_names import did_you_mean

EXIT_USAGE = 2

_Parsed = TypeVar("_Parsed")


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser``, its errors one line naming the program."""

    # The words this parser was last given (a subcommand's parser: those after its name),
    # for the options among them that it does not take.
    _given: Sequence[str] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations, for every parser and each subcommand's (add_parser makes them
        # of this class): a script's --stat, read as --state today, would be refused as
        # ambiguous the day an option --stats is added.
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None, namespace: _Parsed
    ) -> tuple[_Parsed, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _Parsed) -> tuple[_Parsed, list[str]]: ...

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: object = None
    ) -> tuple[object, list[str]]:
        # Each subcommand's parser is called here too, with the arguments after its name.
        self._given = self._prepared(list(sys.argv[1:] if args is None else args))
        return super().parse_known_args(self._given, namespace)

    def _prepared(self, given: list[str]) -> list[str]:
        """The words argparse is to read, made from those given: the same here; a
        subclass may rewrite them (``cli.command.Parser`` joins negative values)."""
        return given

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse refuses a mistyped command as an invalid choice followed by every choice:
        # at the top level, a long line of names with none picked out.
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            # The commands these are actions of (``workflow `` in ``taskq workflow``), so that
            # the name refused and the one offered are each whole.
            under = "".join(f"{word} " for word in self.prog.split()[1:])
            known = [under + name for name in action.choices]
            hint = did_you_mean([under + value], known, prefix=under)
            raise argparse.ArgumentError(None, f"no command {under + value!r}{hint}")
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        program = self.prog.split()[0]
        message += self._closest_options(message) + self._words_after_options(message)
        self.exit(EXIT_USAGE, f"{program}: error: {message} (see '{self.prog} --help')\n")

    def _closest_options(self, message: str) -> str:
        """`` (did you mean --state?)`` for the options given that this parser does not take,
        naming them first unless ``message`` does (a mistyped option may be refused for
        what it did to the words after it: ``--qeue x pkg.mod:f`` makes ``x`` the call)."""
        unknown = self._unknown_options()
        # argparse keeps no public list of a parser's options; these are what it parses by.
        known = [
            option
            for action in self._actions
            if action.help is not argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--")
        ]
        hint = did_you_mean(unknown, known, prefix="--")
        if not hint or all(option in message for option in unknown):
            return hint
        return f"; no option {', '.join(unknown)}{hint}"

    def _words_after_options(self, message: str) -> str:
        """``; the ARG words go together, before any option`` where the words left over
        are all plain words and this command takes a list of them: ``submit f 1 --wait 2``
        gave ``f 1`` to the call, and argparse takes no more of a list after an option."""
        _, marker, left = message.partition("unrecognized arguments: ")
        # Beside an unknown option, its value is the leftover word: that option is the fault.
        if not marker or any(word.startswith("-") for word in left.split()):
            return ""
        for action in self._actions:
            if not action.option_strings and action.nargs in ("*", "+"):
                words = action.metavar or action.dest.upper()
                return f"; the {words} words go together, before any option"
        return ""

    def _unknown_options(self) -> list[str]:
        """The long options given that this parser does not take. A parser of subcommands
        stops at its first other word: the subcommand's name (or a mistyped one), after
        which the words are not its own."""
        commands = any(isinstance(action, argparse._SubParsersAction) for action in self._actions)
        options = self._option_string_actions
        unknown = []
        words = iter(self._given)
        for word in words:
            if word == "--":  # the rest are positional
                break
            option, equals, _ = word.partition("=")
            taken = options.get(option)
            if taken is not None and taken.nargs is None and not equals:
                next(words, None)  # its value, which is no option whatever it looks like
            elif taken is None and option.startswith("--"):
                unknown.append(option)
            elif taken is None and commands and not option.startswith("-"):
                break
        return unknown
