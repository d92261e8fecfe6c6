"""No-op jobs for the bench, run inside the workers' sandboxes.

Workers import this module as ``bench.jobs`` (the bench puts the directory
that holds ``bench/`` on their ``PYTHONPATH``); it imports nothing but the
standard library, and neither does ``bench/__init__.py``.
"""

from __future__ import annotations

import time


def echo(value: object) -> object:
    """Return the argument: the no-op job of the throughput measurements."""
    return value


def stamp(value: object) -> float:
    """Return the wall-clock time at which the job started (for pickup latency)."""
    return time.time()


def began(value: object) -> list[float]:
    """``[time.monotonic(), time.time()]`` as the job's first act: when its code started.

    The monotonic clock is the machine's, the same in every process, so the
    bench compares it across the workers' sandboxes without a wall-clock
    step; the wall clock places the job among the store's own times.
    """
    return [time.monotonic(), time.time()]


def ended(value: object) -> list[float]:
    """``[time.monotonic(), time.time()]`` as the job's last act: when its code ended."""
    return [time.monotonic(), time.time()]


def ended_after(value: object, seconds: float) -> list[float]:
    """Sleep ``seconds`` (a parent's own work), then :func:`ended`'s stamps."""
    time.sleep(seconds)
    return [time.monotonic(), time.time()]


def say(value: object) -> object:
    """Print one line and return the argument: the no-op job that prints."""
    print(f"job {value} says hello")
    return value


def print_stamps(lines: int, gap: float) -> int:
    """Print ``lines`` lines ``gap`` seconds apart, each with the wall-clock time it was printed."""
    for number in range(lines):
        print(f"stamp {number} {time.time():.6f}")
        time.sleep(gap)
    return lines
