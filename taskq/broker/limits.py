"""Resource limits for one job, parsed from JSON and clamped to the worker's maximums.

Sizes may be written as a number of bytes or as a string with a binary unit
(``"256MiB"``, ``"1GiB"``), because a limit in a TOML file or a job spec is
read by people. Every limit is finite: a worker always bounds what a job may
take. Each limit's :class:`Form` is declared once (:data:`FORMS`), for the
parser here and for the HTTP API's schema of ``limits``; so is the text of a
size, whose pattern (:func:`size_pattern`) is written in the part of regular
expressions that Python and JSON Schema read alike.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskq import errors
from taskq.close_names import did_you_mean

_KIB = 1024
UNITS = {"B": 1, "KiB": _KIB, "MiB": _KIB**2, "GiB": _KIB**3, "TiB": _KIB**4}
"""The units a size may be written in, in any letter case; a number alone is bytes."""
_UNIT_BYTES = {"": 1, **{unit.upper(): factor for unit, factor in UNITS.items()}}
# ASCII white space: Python's \s would take Unicode's too, and ECMA-262's (JSON Schema's) a
# slightly different set, so a size's text is held to the part both read alike.
_SPACE = r"[\t-\r ]*"
_SIZE = re.compile(rf"{_SPACE}([0-9]+){_SPACE}([A-Za-z]*){_SPACE}")


class Form(enum.Enum):
    """How a limit is written."""

    SIZE = "size"
    """Bytes: a whole number, or text with a binary unit (``"512MiB"``)."""
    WHOLE = "whole"
    """A whole number (setrlimit takes no fractions)."""
    SECONDS = "seconds"
    """A number of seconds."""


class LimitsInvalid(errors.TaskqError):
    """A job's or a worker's resource limits are malformed."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one job may use; every field is a positive maximum.

    ``memory_bytes`` is address space (RLIMIT_AS), not resident memory: it
    also counts mapped-but-untouched pages, thread stacks and malloc arenas.
    ``cpu_seconds`` is whole seconds because RLIMIT_CPU is. ``wall_seconds``
    runs from when the job is sent to its child, so it includes the start-up
    of a fresh child. ``log_tail_bytes``
    is how much of the end of stdout+stderr is kept; ``output_bytes`` is how
    much the job may write in all before it is killed (a guard against floods:
    the store keeps only the end of the output and the worker holds a bounded
    part of it, so a long job's steady log needs no room). ``processes`` caps the
    processes and threads of the job's whole tree where the worker has a
    cgroup pids controller (see ``taskq.worker.sandbox.cgroups``); where it has a
    memory controller, ``memory_bytes`` bounds the tree's resident memory too.
    """

    memory_bytes: int = 1024 * _KIB**2
    cpu_seconds: int = 600
    wall_seconds: float = 3600.0
    open_files: int = 1024
    log_tail_bytes: int = 64 * _KIB
    output_bytes: int = 1024 * _KIB**2
    result_bytes: int = _KIB**2
    processes: int = 256

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            # Fields annotated int feed setrlimit, which takes whole numbers only.
            whole = field.type in ("int", int)
            if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
                kind = "whole number" if whole else "number"
                raise LimitsInvalid(f"limit {field.name} must be a {kind}, not {value!r}")
            # A whole number may be past any float (math.isfinite would overflow): no NaN either.
            if value <= 0 or (isinstance(value, float) and not math.isfinite(value)):
                raise LimitsInvalid(f"limit {field.name} must be positive and finite, not {value}")

    def bounded_by(self, worker_max: Limits) -> Limits:
        """These limits, each lowered to the worker's maximum where it asks for more."""
        if self == worker_max:
            return self  # the common case, a job on the worker's defaults: nothing to lower
        return Limits(
            **{
                field.name: min(getattr(self, field.name), getattr(worker_max, field.name))
                for field in dataclasses.fields(self)
            }
        )

    def to_dict(self) -> dict[str, int | float]:
        """The limits as plain JSON numbers, the inverse of ``parse_limits``."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


FORMS: dict[str, Form] = {
    "memory_bytes": Form.SIZE,
    "cpu_seconds": Form.WHOLE,
    "wall_seconds": Form.SECONDS,
    "open_files": Form.WHOLE,
    "log_tail_bytes": Form.SIZE,
    "output_bytes": Form.SIZE,
    "result_bytes": Form.SIZE,
    "processes": Form.WHOLE,
}
"""Every limit a job may set, by name, and how it is written."""


def parse_limits(data: Mapping[str, object], *, defaults: Limits | None = None) -> Limits:
    """Build limits from a JSON-ish mapping; missing keys keep ``defaults``.

    Unknown keys are errors rather than ignored, so a misspelt limit cannot
    silently leave a job with the default.
    """
    unknown = sorted(set(data) - set(FORMS))
    if unknown:
        raise LimitsInvalid(
            f"unknown limit(s) {', '.join(unknown)}{did_you_mean(unknown, FORMS)}; "
            f"known: {', '.join(sorted(FORMS))}"
        )
    # Any: each value is checked against its field's kind here, and Limits checks again.
    values: dict[str, Any] = {}
    for name, raw in data.items():
        form = FORMS[name]
        if form is Form.SIZE:
            values[name] = parse_size(name, raw)
        elif form is Form.WHOLE:
            values[name] = _parse_whole_number(name, raw)
        else:
            values[name] = _parse_seconds(name, raw)
    return dataclasses.replace(defaults or Limits(), **values)


def parse_size(name: str, raw: object) -> int:
    """A size in bytes: a whole number, or text with a binary unit ("256MiB"), any case."""
    if isinstance(raw, str):
        match = _SIZE.fullmatch(raw)
        unit = match.group(2).upper() if match else ""
        if match is None or unit not in _UNIT_BYTES:
            raise LimitsInvalid(
                f"{name} = {raw!r} is not a size; write bytes or e.g. '256MiB', '2GiB'"
            )
        return int(match.group(1)) * _UNIT_BYTES[unit]
    return _parse_whole_number(name, raw)


def size_pattern(most: int) -> str:
    """The pattern of exactly the texts :func:`parse_size` reads as 1 to ``most`` bytes.

    Anchored, in the part of regular expressions Python and ECMA-262 read
    alike. The number may have leading zeros, as ``int`` reads them; each
    unit's largest number is spelt out digit by digit, so that no text the
    pattern matches is refused for its size.
    """
    choices = []
    for unit, factor in UNITS.items():
        if most >= factor:
            letters = "".join(f"[{letter.upper()}{letter.lower()}]" for letter in unit)
            spelt = f"(?:{letters})?" if factor == 1 else letters  # bytes: the unit is optional
            choices.append(f"{_numerals_up_to(most // factor)}{_SPACE}{spelt}")
    return f"^{_SPACE}(?:{'|'.join(choices)}){_SPACE}$"


def _numerals_up_to(most: int) -> str:
    """A pattern of the decimal numerals of 1 to ``most`` (leading zeros allowed)."""
    digits = str(most)
    choices = []
    if len(digits) > 1:  # every shorter numeral
        choices.append("[1-9]" + (f"[0-9]{{0,{len(digits) - 2}}}" if len(digits) > 2 else ""))
    for at, digit in enumerate(digits):  # as long: the same digits up to one that is lower
        lowest = 1 if at == 0 else 0
        if int(digit) > lowest:
            lower = str(lowest) if int(digit) == lowest + 1 else f"[{lowest}-{int(digit) - 1}]"
            rest = len(digits) - at - 1
            tail = {0: "", 1: "[0-9]"}.get(rest, f"[0-9]{{{rest}}}")
            choices.append(digits[:at] + lower + tail)
    choices.append(digits)
    return f"0*(?:{'|'.join(choices)})"


def with_whole_numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each whole-number limit written as a whole float (``2.0``) made an int.

    JSON has one kind of number, and JSON Schema (so the HTTP API's document)
    reads 2.0 as the integer 2: a body read from JSON is taken as it means.
    """
    whole = (Form.SIZE, Form.WHOLE)
    return {
        name: int(value)
        if FORMS.get(name) in whole and isinstance(value, float) and value.is_integer()
        else value
        for name, value in data.items()
    }


def _parse_whole_number(name: str, raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise LimitsInvalid(f"limit {name} must be a whole number, not {raw!r}")
    return raw


def _parse_seconds(name: str, raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise LimitsInvalid(f"limit {name} must be a number of seconds, not {raw!r}")
    try:
        return float(raw)
    except OverflowError:  # a whole number past any float's range
        raise LimitsInvalid(f"limit {name} is too many seconds to count") from None
