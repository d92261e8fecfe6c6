"""Reading command-line values: JSON arguments, durations, rates, times, sizes.

Each function is an argparse ``type``: a bad value raises
``argparse.ArgumentTypeError`` with a message that says what to write
instead, and argparse turns it into a usage error (exit 2) before anything
touches the store.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from taskq import errors
from taskq.broker import job_validation, limits, schedule_timing

NONE_WORDS = {"none", "off", "unlimited"}


def json_value(text: str) -> Any:
    """A JSON value: ``1``, ``'"text"'``, ``'[1, 2]'``, ``'{"a": 1}'``, ``true``, ``null``."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not JSON ({exc}); {_json_hint(text)}"
        ) from None


def _json_hint(text: str) -> str:
    """What to write instead of ``text``: keyword arguments for ``name=value``, else a string."""
    name, equals, value = text.partition("=")
    if equals and name.isidentifier():
        # Written as Python's keyword argument; the command's ARGs are positional only.
        example = shlex.quote(json.dumps({name: _json_or_text(value)}))
        return f"keyword arguments go in --kwargs as a JSON object, e.g. --kwargs {example}"
    hint = "" if text.lstrip()[:1] in ("[", "{", '"') else f", e.g. '\"{text}\"'"
    return f"write strings in JSON quotes{hint}"


def _json_or_text(text: str) -> Any:
    """``text`` read as JSON, else as the string it spells (``name=bob`` means ``"bob"``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_object(text: str) -> dict[str, Any]:
    """A JSON object, for keyword arguments: ``'{"size": 800}'``."""
    value = json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object, e.g. '{{\"size\": 800}}'")
    return value


def seconds(text: str) -> float:
    """A positive duration: ``90`` (seconds), ``90s``, ``10m``, ``2h``, ``1d``, ``250ms``."""
    try:
        return schedule_timing.parse_duration(text)
    except errors.ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_with_unit(text: str) -> float:
    """A positive duration with its unit (``30d``, ``12h``): for what deletes jobs, where a
    bare ``30``, read as seconds, would delete those meant to be kept for 30 days."""
    value = seconds(text)
    bare = text.strip()
    if bare.replace(".", "", 1).isdigit():
        raise argparse.ArgumentTypeError(
            f"{bare!r} needs a unit: {bare}d, {bare}h, {bare}m or {bare}s "
            f"(read as seconds, finished jobs older than {bare} s would go)"
        )
    return value


def at_time(text: str) -> float:
    """An ISO 8601 time (``2026-12-01T09:00``, local time unless it names a zone) as unix time."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time; write e.g. 2026-12-01T09:00 (local time) "
            "or 2026-12-01T09:00+01:00"
        ) from None
    # A naive time is local time; timestamp() reads it so.
    return moment.timestamp()


def memory(text: str) -> int | str:
    """A memory size: bytes, or a binary unit such as ``512MiB`` or ``2GiB``."""
    given = text.strip()
    # ASCII digits, as a size's text takes (isdigit alone would take other scripts' too).
    value: int | str = int(given) if given.isascii() and given.isdigit() else given
    try:
        limits.parse_limits({"memory_bytes": value})
    except limits.LimitsInvalid as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def cpu_seconds(text: str) -> int:
    """Whole seconds of CPU time (the kernel's limit counts whole seconds)."""
    value = seconds(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"CPU time is whole seconds, got {text!r}")
    return int(value)


def job_ids(text: str) -> tuple[int, ...]:
    """Job ids separated by commas: ``12,13``."""
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not job ids; write them separated by commas, e.g. 12,13"
        ) from None
    return ids


def count(text: str) -> int:
    """A whole number from 1 to 1000 (a page of a listing)."""
    return _whole_number(text, 1, 1000)


def attempt_number(text: str) -> int:
    """An attempt's number: from 1 to the most attempts a job may have."""
    return _whole_number(text, 1, job_validation.MAX_ATTEMPTS)


def _whole_number(text: str, least: int, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not least <= value <= most:
        raise argparse.ArgumentTypeError(f"must be from {least} to {most}, got {value}")
    return value


def max_running(text: str) -> int | None:
    """A concurrency cap: a whole number, or ``none`` to lift it."""
    if text.strip().lower() in NONE_WORDS:
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number or 'none'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"the cap must be 0 or more, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` per ``period`` seconds."""

    count: float
    period: float

    def __str__(self) -> str:
        return format_rate(self.count, self.period)


def rate(text: str) -> Rate:
    """``N/PERIOD``: ``100/1s``, ``1000/1m``, ``5/10s``; the period's number may be left out."""
    count_text, slash, period_text = text.partition("/")
    hint = "write N/PERIOD, e.g. 100/1s, 1000/1m or 5/10s"
    if not slash:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate; {hint}")
    try:
        count = float(count_text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {count_text!r} is not a number; {hint}"
        ) from None
    if not (math.isfinite(count) and count > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: the count must be positive; {hint}")
    period_text = period_text.strip()
    if period_text[:1].isalpha():
        period_text = "1" + period_text
    try:
        period = schedule_timing.parse_duration(period_text)
    except errors.ConfigError:
        raise argparse.ArgumentTypeError(f"{text!r}: bad period; {hint}") from None
    return Rate(count, period)


def rate_or_none(text: str) -> Rate | None:
    """A rate, or ``none`` to lift it."""
    return None if text.strip().lower() in NONE_WORDS else rate(text)


def format_rate(count: float, period: float) -> str:
    """``100/1s``, ``1000/1m``, ``5/10s``: the way :func:`rate` reads it."""
    for unit, unit_seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if period >= unit_seconds and period % unit_seconds == 0:
            return f"{count:g}/{period / unit_seconds:g}{unit}"
    return f"{count:g}/{period:g}s"
