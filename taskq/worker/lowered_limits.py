"""A job's limits its worker lowered to ``[worker.max_limits]``, told where its owner looks.

A job may ask for more than its worker allows (``--memory 4GiB`` where the
worker's most is the default 1 GiB); it then runs within the worker's most,
as docs/worker.md says. Unsaid, that reads as a limit broken: the job asked
for two hours and was killed at one. So the worker says so in its log when
such a job starts (``limits_lowered``), and the error of an attempt that
ended at a lowered limit names what the job asked for and why it got less.
"""

from __future__ import annotations

import dataclasses

import msgspec

from taskq import humanize
from taskq.broker.limits import FORMS, Form, Limits
from taskq.worker.sandbox.outcome import Outcome, Status

LOWERED_HINT = "raise [worker.max_limits] in the worker's config to allow more"

# The limit an attempt's status says it ran into.
_LIMIT_OF_STATUS = {
    Status.TIMEOUT: "wall_seconds",
    Status.CPU: "cpu_seconds",
    Status.MEMORY: "memory_bytes",
    Status.OUTPUT_LIMIT: "output_bytes",
}


def lowered(asked: Limits, applied: Limits) -> dict[str, tuple[float, float]]:
    """Each limit that ``applied`` lowers, by name: what was asked, and what applies."""
    return {
        field.name: (getattr(asked, field.name), getattr(applied, field.name))
        for field in dataclasses.fields(Limits)
        if getattr(applied, field.name) < getattr(asked, field.name)
    }


def described(lowered: dict[str, tuple[float, float]]) -> str:
    """``memory_bytes 4.0 GiB to 1.0 GiB, wall_seconds 2h00m to 1h00m``."""
    return ", ".join(
        f"{name} {_written(name, asked)} to {_written(name, applied)}"
        for name, (asked, applied) in lowered.items()
    )


def told(outcome: Outcome, lowered: dict[str, tuple[float, float]]) -> Outcome:
    """``outcome``, its error naming the asked limit when the attempt ended at a lowered one."""
    name = _LIMIT_OF_STATUS.get(outcome.status)
    if name is None or name not in lowered or outcome.error is None:
        return outcome
    asked, applied = lowered[name]
    note = (
        f" (the job asked for {name} {_written(name, asked)}; this worker's "
        f"[worker.max_limits] lowered it to {_written(name, applied)})"
    )
    error = {**outcome.error, "message": outcome.error["message"] + note}
    return msgspec.structs.replace(outcome, error=error)


def _written(name: str, value: float) -> str:
    form = FORMS[name]
    if form is Form.SIZE:
        return humanize.size(value)
    if form is Form.SECONDS:
        return humanize.duration(value, precise=False)
    return f"{value:g} s" if name.endswith("_seconds") else f"{value:g}"
