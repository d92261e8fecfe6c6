"""Resource limits for one job, parsed from JSON and clamped to the worker's maximums.

Sizes may be written as a number of bytes or as a string with a binary unit
(``"256MiB"``, ``"1GiB"``), because a limit in a TOML file or a job spec is
read by people. Every limit is finite: a worker always bounds what a job may
take.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskq import errors

_KIB = 1024
_UNIT_BYTES = {"": 1, "B": 1, "KIB": _KIB, "MIB": _KIB**2, "GIB": _KIB**3, "TIB": _KIB**4}
_SIZE = re.compile(r"\s*(\d+)\s*([A-Za-z]*)\s*")


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
            if not math.isfinite(value) or value <= 0:
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


_SIZE_FIELDS = {"memory_bytes", "log_tail_bytes", "output_bytes", "result_bytes"}
_INT_FIELDS = {"cpu_seconds", "open_files", "processes"}
_FLOAT_FIELDS = {"wall_seconds"}


def parse_limits(data: Mapping[str, object], *, defaults: Limits | None = None) -> Limits:
    """Build limits from a JSON-ish mapping; missing keys keep ``defaults``.

    Unknown keys are errors rather than ignored, so a misspelt limit cannot
    silently leave a job with the default.
    """
    known = _SIZE_FIELDS | _INT_FIELDS | _FLOAT_FIELDS
    unknown = sorted(set(data) - known)
    if unknown:
        raise LimitsInvalid(
            f"unknown limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    # Any: each value is checked against its field's kind here, and Limits checks again.
    values: dict[str, Any] = {}
    for name, raw in data.items():
        if name in _SIZE_FIELDS:
            values[name] = parse_size(name, raw)
        elif name in _INT_FIELDS:
            values[name] = _parse_whole_number(name, raw)
        else:
            values[name] = _parse_seconds(name, raw)
    return dataclasses.replace(defaults or Limits(), **values)


def parse_size(name: str, raw: object) -> int:
    """A size in bytes: a whole number, or text with a binary unit ("256MiB")."""
    if isinstance(raw, str):
        match = _SIZE.fullmatch(raw)
        unit = match.group(2).upper() if match else ""
        if match is None or unit not in _UNIT_BYTES:
            raise LimitsInvalid(
                f"limit {name} = {raw!r} is not a size; write bytes or e.g. '256MiB', '2GiB'"
            )
        return int(match.group(1)) * _UNIT_BYTES[unit]
    return _parse_whole_number(name, raw)


def _parse_whole_number(name: str, raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise LimitsInvalid(f"limit {name} must be a whole number, not {raw!r}")
    return raw


def _parse_seconds(name: str, raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise LimitsInvalid(f"limit {name} must be a number of seconds, not {raw!r}")
    return float(raw)
