"""Durations, sizes and JSON written short, for the console and the command line alike."""

from __future__ import annotations

from typing import Any


def duration(seconds: float | None, *, precise: bool = True) -> str:
    """``0.42s``, ``12.3s``, ``3m12s``, ``2h05m``, ``3d04h``; ``precise`` keeps sub-seconds."""
    if seconds is None:
        return "-"
    if seconds < 60:
        if not precise:
            return f"{int(seconds)}s"
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def size(nbytes: float | None) -> str:
    """Bytes in binary units: ``812 B``, ``38.2 MiB``."""
    if nbytes is None:
        return "-"
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def slots(count: int, most: int | None) -> str:
    """A worker's slots: ``4``, or ``4/8`` when it autoscales up to ``most``."""
    return str(count) if most is None else f"{count}/{most}"


def compact_json(value: Any) -> str:
    """JSON on one line, as short as it gets."""
    import json  # Imported here, not with the module: a worker's start has no use for it

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
