"""Short, fixed-width renderings of durations, sizes and job payloads for tables."""

from __future__ import annotations

import json
from typing import Any

from taskq.broker.records import Job, PayloadKind


def duration(seconds: float | None, *, precise: bool = True) -> str:
    """``0.42s``, ``12.3s``, ``3m12s``, ``2h05m``, ``3d04h``; ``precise`` keeps sub-seconds."""
    if seconds is None:
        return "-"
    if seconds < 60:
        if not precise:
            return f"{int(seconds)}s"
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def size(nbytes: int | None) -> str:
    """Bytes in binary units: ``812 B``, ``38.2 MiB``."""
    if nbytes is None:
        return "-"
    if nbytes < 1024:
        return f"{nbytes} B"
    value = nbytes / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def compact_json(value: Any) -> str:
    """JSON on one line, as short as it gets."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


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


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
