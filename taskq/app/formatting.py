"""Short, fixed-width renderings of durations, sizes, moments and job payloads for tables,
and the cutting of a cell's text to the width its column has.

Ages and times are read off a :class:`Clock`, whose ``now`` and time zone
tests and snapshots fix, so what the console shows does not change between runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal

from rich.cells import cell_len
from rich.text import Text

from taskq.broker.records import Job, PayloadKind
from taskq.humanize import compact_json as compact_json
from taskq.humanize import duration as duration
from taskq.humanize import size as size


def target(job: Job) -> str:
    """What the job runs: its import path, its function name, or its command."""
    payload = job.payload
    if job.kind is PayloadKind.CALL:
        return str(payload.get("target", "?"))
    if job.kind is PayloadKind.PYTHON_EXEC:
        return f"python_exec:{payload.get('function', '?')}"
    return " ".join(str(arg) for arg in payload.get("argv", [])) or "shell"


def arguments(job: Job) -> str:
    """The job's arguments on one line: positional, then keyword."""
    payload = job.payload
    if job.kind is PayloadKind.SHELL:
        return str(payload.get("cwd") or "")
    parts = [compact_json(arg) for arg in payload.get("args", [])]
    parts += [f"{key}={compact_json(value)}" for key, value in payload.get("kwargs", {}).items()]
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Clock:
    """Where "now" comes from, and the zone absolute times are shown in (local by default)."""

    now: Callable[[], float] = field(default=time.time)
    tz: tzinfo | None = None

    def ago(self, moment: float | None) -> str:
        """How long ago ``moment`` was, e.g. ``3m12s``; a future moment reads ``in 5s``."""
        if moment is None:
            return "-"
        delta = self.now() - moment
        if delta < 0:
            return f"in {duration(-delta, precise=False)}"
        return duration(delta, precise=False)

    def at(self, moment: float | None) -> str:
        """``moment`` as a date and time to the second, in the clock's zone."""
        if moment is None:
            return "-"
        return datetime.fromtimestamp(moment, self.tz).strftime("%Y-%m-%d %H:%M:%S")


Elide = Literal["middle", "end"]
"""Where a cut text loses its characters: ids, paths and names keep both ends, since
their distinguishing part is often the last (a worker id's suffix, a file name)."""


def elide(text: Text, width: int, where: Elide) -> Text:
    """``text`` cut to ``width`` cells, an ellipsis standing where characters were taken out."""
    if text.cell_len <= width:
        return text
    if where == "end":
        cut = text.copy()
        cut.truncate(width, overflow="ellipsis")
        return cut
    kept = max(width - 1, 0)
    # The end gets the odd cell: it is the part that tells ids and paths apart.
    tail_cells = (kept + 1) // 2
    plain = text.plain
    head = _fitting(plain, kept - tail_cells)
    tail = _fitting(plain[::-1], tail_cells)
    return text[:head] + "…" + text[len(plain) - tail :]


def _fitting(chars: str, cells: int) -> int:
    """How many of ``chars``, from the first, fit in ``cells`` cells (wide characters take two)."""
    used = 0
    for count, char in enumerate(chars):
        used += cell_len(char)
        if used > cells:
            return count
    return len(chars)
