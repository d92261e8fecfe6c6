"""The options that describe a job, shared by ``taskq submit`` and ``taskq schedule add``.

Their flags are built from the broker's one declaration of a job's options
(``taskq.broker.client.job_options``): names, defaults, help and which flags
go together are read from there, and only how a flag's value is read (its
form) is the command line's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import msgspec

from taskq.broker.client import job_options as broker_options
from taskq.cli import values


def add_call_arguments(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The target and its JSON arguments; ``optional`` where other options may name the job."""
    parser.add_argument(
        "target",
        nargs="?" if optional else None,
        metavar="pkg.mod:func",
        help="the function to call",
    )
    parser.add_argument(
        "args",
        nargs="*",
        type=values.json_value,
        metavar="ARG",
        help="positional arguments, each a JSON value: 1 '\"text\"' '[1, 2]' '{\"a\": 1}'",
    )
    parser.add_argument(
        "--kwargs",
        type=values.json_object,
        default={},
        metavar="JSON",
        help="keyword arguments as a JSON object, e.g. '{\"size\": 800}'",
    )


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """The flags of the options any job takes, a schedule's too."""
    _add_flags(parser, one_submit=False)


def add_submit_options(parser: argparse.ArgumentParser) -> None:
    """The flags of the options only a job submitted now takes: when, its key, its parents."""
    _add_flags(parser, one_submit=True)


# How the command line reads the value of a flag whose form is named...
_FORMS: dict[str, Callable[[str], Any]] = {
    "duration": values.seconds,
    "time": values.at_time,
    "size": values.memory,
    "cpu_seconds": values.cpu_seconds,
    "ids": values.job_ids,
}
# ... and of one whose option's type says it all.
_TYPES: dict[type[msgspec.inspect.Type], Callable[[str], Any]] = {
    msgspec.inspect.StrType: str,
    msgspec.inspect.IntType: int,
    msgspec.inspect.FloatType: float,
}


def _add_flags(parser: argparse.ArgumentParser, *, one_submit: bool) -> None:
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for option in broker_options.declared():
        for flag in option.flags:
            if flag.one_submit != one_submit:
                continue
            where: argparse._ActionsContainer = parser
            if flag.group:
                if flag.group not in groups:
                    groups[flag.group] = parser.add_mutually_exclusive_group()
                where = groups[flag.group]
            where.add_argument(flag.name, **_argument(option, flag))


def _argument(option: broker_options.Declared, flag: broker_options.Flag) -> dict[str, Any]:
    """The keywords of ``add_argument`` for one flag: where it stores, how it reads, its help."""
    kind = _without_none(option.type)
    keywords: dict[str, Any] = {
        "dest": _dest(option, flag),
        "help": flag.help or option.description,
    }
    if flag.metavar is not None:
        keywords["metavar"] = flag.metavar
    if isinstance(kind, msgspec.inspect.BoolType):
        return {**keywords, "action": "store_true", "default": None}
    if flag.repeatable:
        assert isinstance(kind, msgspec.inspect.ListType)
        return {**keywords, "action": "append", "type": _reader(flag, kind.item_type)}
    if isinstance(kind, msgspec.inspect.VarTupleType):
        # Several items in one value (--after 12,13), and more in each repeat, in order: a
        # job named twice is refused with the rest (job_validation.check_parents).
        return {**keywords, "action": "extend", "default": None, "type": _reader(flag, kind)}
    # None when not given, so that a submit by name can tell the options given
    # (which win over the declared ones) from the defaults (given_options).
    return {**keywords, "default": None, "type": _reader(flag, kind)}


def _reader(flag: broker_options.Flag, kind: msgspec.inspect.Type) -> Callable[[str], Any]:
    return _FORMS[flag.form] if flag.form else _TYPES[type(_bare(kind))]


def _without_none(kind: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """An optional option's type without its None: a flag left out stands for its default."""
    if not isinstance(kind, msgspec.inspect.UnionType):
        return kind
    [kind] = [each for each in kind.types if not isinstance(each, msgspec.inspect.NoneType)]
    return _bare(kind)


def _bare(kind: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """``kind`` without the bounds the schema states (job_validation checks them), which say
    nothing of how a flag reads."""
    return kind.type if isinstance(kind, msgspec.inspect.Metadata) else kind


def _dest(option: broker_options.Declared, flag: broker_options.Flag) -> str:
    return f"{option.name}.{flag.key}" if flag.key else option.name


def job_options(args: argparse.Namespace, *, submitter: str) -> dict[str, Any]:
    """Every option by name, as given or, where it was not, as declared."""
    given = given_options(args)
    options: dict[str, Any] = {"submitter": submitter}
    for option in broker_options.declared():
        options[option.name] = given.get(option.name, option.default)
    return options


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options whose flags the command line gives, and only they, by name."""
    given = vars(args)
    options: dict[str, Any] = {}
    for option in broker_options.declared():
        if any(flag.key for flag in option.flags):
            destinations = {flag.key: _dest(option, flag) for flag in option.flags}
            entries = {
                key: given[dest]
                for key, dest in destinations.items()
                if given.get(dest) is not None
            }
            if entries:
                options[option.name] = entries
        elif given.get(option.name) is not None:
            options[option.name] = given[option.name]
    return options
