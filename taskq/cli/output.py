"""How the ``taskq`` command shows things: tables, JSON, local times, durations, sizes.

People read tables with local times and short durations; scripts read
``--json``, whose keys are the broker's record fields and whose times are
unix seconds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

import msgspec

from taskq.broker.records import Job, JobState, PayloadKind
from taskq.humanize import clip
from taskq.humanize import compact_json as compact_json
from taskq.humanize import duration as duration
from taskq.humanize import size as size

_CELL_WIDTH = 60


def print_json(value: Any) -> None:
    """Print ``value`` (records, lists, dicts) as indented JSON on stdout."""
    print(json.dumps(plain(value), indent=2, ensure_ascii=False))


def print_json_fields(fields: Mapping[str, Any]) -> None:
    """Print the object ``fields`` as :func:`print_json` would, a field whose value is an
    iterator written item by item as a list, so that its items are never held all at once."""
    out = sys.stdout
    out.write("{")
    for position, (key, value) in enumerate(fields.items()):
        out.write(("," if position else "") + "\n  " + json.dumps(key, ensure_ascii=False) + ": ")
        if isinstance(value, Iterator):
            _write_json_items(out, value)
        else:
            out.write(_json_at_depth(value, 1))
    out.write("\n}\n" if fields else "}\n")


def _write_json_items(out: TextIO, items: Iterator[Any]) -> None:
    opened = False
    for item in items:
        out.write(("," if opened else "[") + "\n    " + _json_at_depth(item, 2))
        opened = True
    out.write("\n  ]" if opened else "[]")


def _json_at_depth(value: Any, depth: int) -> str:
    """``value`` as :func:`print_json` writes it ``depth`` levels into a document: a
    newline inside the text is always the indented layout's, as JSON escapes those of strings."""
    text = json.dumps(plain(value), indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + "  " * depth)


def plain(value: Any) -> Any:
    """``value`` with its records (dataclasses or Structs) as dicts, ready for ``json.dumps``.

    Enums become their values and mapping keys strings, as JSON has them.
    """
    return msgspec.to_builtins(value, str_keys=True)


def print_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], *, cell_width: int = _CELL_WIDTH
) -> None:
    """Columns padded to their widest cell; cells past ``cell_width`` are cut with an ellipsis."""
    cells = [[one_line(str(cell), cell_width) for cell in row] for row in (header, *rows)]
    widths = [max(len(row[index]) for row in cells) for index in range(len(header))]
    for row in cells:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print(line.rstrip())


def one_line(text: str, width: int = _CELL_WIDTH) -> str:
    """``text`` on one line (a table cell), at most ``width`` characters."""
    return clip(" ".join(text.split()), width)


def warn(message: str) -> None:
    """A note for the person at the terminal (stderr, so stdout stays parseable)."""
    print(message, file=sys.stderr)


def local_time(timestamp: float | None, *, now: float | None = None) -> str:
    """A unix time in local time: ``14:03:12`` today, else ``2026-05-09 14:03``."""
    if timestamp is None:
        return "-"
    moment = datetime.fromtimestamp(timestamp)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    if moment.date() == today:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M")


def relative(timestamp: float, *, now: float | None = None) -> str:
    """``in 3m12s`` or ``5.0s ago``."""
    delta = timestamp - (time.time() if now is None else now)
    if delta >= 0:
        return f"in {duration(delta)}"
    return f"{duration(-delta)} ago"


def span(seconds: float) -> str:
    """A length of time as written in options: ``90s``, ``10m``, ``1h30m``, ``7d``, ``0.5s``."""
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    rest = round(seconds)
    parts = []
    for unit, unit_seconds in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, rest = divmod(rest, unit_seconds)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"


def call(job: Job) -> str:
    """What a job runs, as one line: ``pkg.mod:func(1, "x", key=2)`` or its command."""
    return call_text(job.kind, job.payload)


def call_text(kind: str, payload: dict[str, Any]) -> str:
    """A payload of ``kind`` as one line (see :func:`call`)."""
    if kind == PayloadKind.SHELL:
        return " ".join(str(arg) for arg in payload.get("argv", [])) or "shell"
    name = payload.get("target") or f"python_exec:{payload.get('function', '?')}"
    args = [compact_json(arg) for arg in payload.get("args", [])]
    args += [f"{key}={compact_json(value)}" for key, value in payload.get("kwargs", {}).items()]
    return f"{name}({', '.join(args)})"


def error_line(error: dict[str, Any] | None) -> str:
    """A job's or an attempt's error as ``Type: message``."""
    if not error:
        return ""
    return f"{error.get('type', 'Error')}: {error.get('message', '')}".strip().rstrip(":")


def ended_error(job: Job) -> dict[str, Any] | None:
    """The error shown as a job's own wherever a job is shown: why it ended, for a job
    that ended failed, dead or cancelled; None for any other (a job waiting, queued or
    running again keeps an earlier error on its record: :func:`last_attempt_error`)."""
    return job.error if job.state.finished and job.state is not JobState.SUCCEEDED else None


# Errors a job's record holds that no attempt of it left: a cancel's by request (one
# that stopped a running attempt among them) and a parent's end's (dependencies.sql).
_NOT_AN_ATTEMPTS = frozenset({"Cancelled", "ParentFailed"})


def last_attempt_error(job: Job) -> dict[str, Any] | None:
    """The error of the attempt before, of a job waiting, queued or running again after it
    failed (the record keeps it until the next attempt ends), shown as that attempt's;
    None for any other, and for an error no attempt left (a cancel's, or a parent's end's,
    which a retry took the job out of). Every attempt's error is in ``taskq logs``."""
    error = job.error
    if not error or job.state.finished or not job.attempts:
        return None
    return None if error.get("type") in _NOT_AN_ATTEMPTS else error


def why_ended(error: dict[str, Any] | None) -> str:
    """:func:`error_line` of an ended job's error, told after its state: a cancel's
    message alone, whose type ``Cancelled`` would say the state again."""
    if error is not None and error.get("type") == "Cancelled" and error.get("message"):
        return str(error["message"])
    return error_line(error)
