"""``taskq queue set|show``: what a queue's jobs get when they say none."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from taskq import errors
from taskq.broker.client.client import KEEP
from taskq.cli import command, connection, output, values
from taskq.config import QueueSection, load_config
from taskq.retry import RetryPolicy

_Value = TypeVar("_Value")
_RETRY_OPTIONS = ("base", "factor", "cap", "jitter", "retry_on", "dont_retry_on")


def _or_none(parse: Callable[[str], _Value]) -> Callable[[str], _Value | None]:
    """``parse``, or None for ``none``: the default is lifted."""

    def parse_or_none(text: str) -> _Value | None:
        return None if text.strip().lower() in values.NONE_WORDS else parse(text)

    parse_or_none.__name__ = parse.__name__  # argparse names the type in its errors
    return parse_or_none


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq queue`` and its subcommands."""
    actions = command.add_group(
        commands,
        "queue",
        help="a queue's job defaults: set, show",
        description="What a queue's jobs get when they say none, applied by every enqueue.\n\n"
        "  taskq queue set images --timeout 10m --max-attempts 5 --memory 1GiB\n"
        "  taskq queue set images --retry-base 30 --retry-cap 1h --retry-on OSError\n"
        "  taskq queue set images --timeout none      # lift one\n"
        "  taskq queue show images",
        dest="queue_command",
    )
    show = command.add(actions, "show", cmd_show, help="show a queue's job defaults", json=True)
    show.add_argument("queue", help="queue name")
    change = command.add(
        actions,
        "set",
        cmd_set,
        help="set a queue's job defaults ('none' lifts one; those not named stay)",
        json=True,
    )
    change.add_argument("queue", help="queue name: one with jobs or settings, or --create")
    change.add_argument(
        "--create",
        action="store_true",
        help="set the defaults of a queue that has no jobs yet "
        "(without it, an unknown name is an error)",
    )
    suppress: dict[str, Any] = {"default": argparse.SUPPRESS}
    change.add_argument(
        "--timeout", type=_or_none(values.seconds), metavar="DURATION|none", **suppress
    )
    change.add_argument("--max-attempts", type=_or_none(_whole), metavar="N|none", **suppress)
    change.add_argument("--memory", type=_or_none(values.memory), metavar="SIZE|none", **suppress)
    change.add_argument(
        "--cpu", type=_or_none(values.cpu_seconds), metavar="SECONDS|none", **suppress
    )
    change.add_argument(
        "--retry",
        choices=["none"],
        **suppress,
        help="lift the queue's retry policy (its jobs get the default one)",
    )
    retry = change.add_argument_group(
        "retry policy", "any of these sets the whole policy; the rest take their defaults"
    )
    retry.add_argument("--retry-base", dest="base", type=values.seconds, **suppress)
    retry.add_argument("--retry-factor", dest="factor", type=_number, **suppress)
    retry.add_argument("--retry-cap", dest="cap", type=values.seconds, **suppress)
    retry.add_argument("--retry-jitter", dest="jitter", type=_number, **suppress)
    for flag, dest in (("--retry-on", "retry_on"), ("--dont-retry-on", "dont_retry_on")):
        retry.add_argument(
            flag, dest=dest, action="append", metavar="EXCEPTION", help="repeatable", **suppress
        )


def cmd_set(args: argparse.Namespace) -> int:
    given = vars(args)
    limits: dict[str, Any] = {}
    if "memory" in given:
        limits["memory_bytes"] = given["memory"]
    if "cpu" in given:
        limits["cpu_seconds"] = given["cpu"]
    retry: Any = KEEP
    policy = {name: given[name] for name in _RETRY_OPTIONS if name in given}
    if policy and "retry" in given:
        raise errors.ConfigError("--retry none lifts the policy: give no --retry-* option with it")
    if policy:
        retry = RetryPolicy(**policy)
    elif "retry" in given:
        retry = None
    with connection.client(args) as client:
        client.set_queue_defaults(
            args.queue,
            timeout=given.get("timeout", KEEP),
            max_attempts=given.get("max_attempts", KEEP),
            limits=limits or KEEP,
            retry=retry,
            create=args.create,
        )
    return _show(args, after_change=True)


def cmd_show(args: argparse.Namespace) -> int:
    return _show(args)


def _show(args: argparse.Namespace, *, after_change: bool = False) -> int:
    with connection.client(args, read_only=True) as client:
        stats = next((queue for queue in client.stats() if queue.queue == args.queue), None)
    config = load_config(args.config)
    configured = _configured(config.queues.get(args.queue))
    if stats is None and not after_change and not configured:
        # As pause and limit refuse it: a misspelt name shows no defaults of its own.
        raise errors.QueueNotFound(f"no queue named {args.queue!r}: it has no jobs and no settings")
    defaults = stats.job_defaults if stats is not None else {}
    if args.json:
        fields: dict[str, Any] = {"queue": args.queue, "job_defaults": defaults}
        if configured:
            fields.update(config_file=str(config.source), config_defaults=configured)
        output.print_json(fields)
        return command.EXIT_OK
    if defaults:
        print(f"queue {args.queue}:")
        for name, value in sorted(defaults.items()):
            print(f"  {name}: {_shown(name, value)}")
    elif stats is None and not after_change:
        print(f"queue {args.queue}: not in the store yet (no jobs, no settings)")
    elif configured:
        print(f"queue {args.queue}: no job defaults in the store")
    else:
        print(f"queue {args.queue}: no job defaults (3 attempts, no timeout, the worker's limits)")
    if configured:
        # The jobs this machine submits get these first, so what the store holds is not
        # all they get: a submit here with 5 attempts must not look like a mistake.
        print(
            f"this machine's config file {config.source} gives the jobs submitted from here, "
            "before the store's defaults:"
        )
        for name, value in sorted(configured.items()):
            print(f"  {name}: {_shown(name, value)}")
    return command.EXIT_OK


def _configured(section: QueueSection | None) -> dict[str, Any]:
    """The job defaults a config file's ``[queues.NAME]`` gives, as the store's are shown."""
    if section is None:
        return {}
    given = {
        "timeout": section.timeout,
        "max_attempts": section.max_attempts,
        "limits": section.limits or None,
        "retry": section.retry,
    }
    return {name: value for name, value in given.items() if value is not None}


def _shown(name: str, value: Any) -> str:
    """A job default as the other commands write its kind: a duration short, limits as
    ``taskq status`` lists them, the retry policy in words (``--json`` keeps the values)."""
    if value is None:
        return "none"
    if name == "timeout":
        return output.span(value)
    if name == "limits":
        return ", ".join(f"{limit}={amount}" for limit, amount in sorted(value.items()))
    if name == "retry":
        return _retry_words(RetryPolicy(**value))
    return str(value)


def _retry_words(policy: RetryPolicy) -> str:
    """``first after 30s, then x2 each time, at most 1h, jitter ±25%; only on OSError``."""
    words = [
        f"first after {output.span(policy.base)}, then x{policy.factor:g} each time, "
        f"at most {output.span(policy.cap)}, jitter ±{policy.jitter:.0%}"
    ]
    if policy.retry_on:
        words.append(f"only on {', '.join(map(str, policy.retry_on))}")
    if policy.dont_retry_on:
        words.append(f"never on {', '.join(map(str, policy.dont_retry_on))}")
    return "; ".join(words)
