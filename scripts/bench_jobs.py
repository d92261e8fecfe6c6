"""No-op jobs for ``scripts/bench.py``, run inside the workers' sandboxes.

Workers import this module as ``bench_jobs`` (the bench puts ``scripts/`` on
their ``PYTHONPATH``); it imports nothing but the standard library.
"""

from __future__ import annotations

import time


def echo(value: object) -> object:
    """Return the argument: the no-op job of the throughput measurements."""
    return value


def stamp(value: object) -> float:
    """Return the wall-clock time at which the job started (for pickup latency)."""
    return time.time()
