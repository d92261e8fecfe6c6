"""Short, fixed-width renderings of durations, sizes and job payloads for tables."""

from __future__ import annotations

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


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
