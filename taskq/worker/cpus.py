"""The CPUs a worker and its jobs may run on (the worker's ``cpus`` setting).

A set is written as Linux writes one in ``/proc`` and ``taskset -c``:
``"0-3,6"``. Pinning the worker pins its sandbox children too, since a child
inherits its parent's affinity: a lab machine can keep cores for other work,
and one worker per CPU keeps each worker's wake-ups of its children on the
core they share.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from taskq import errors


def parse_cpu_list(raw: object) -> frozenset[int]:
    """CPUs from ``"0-3,6"`` or a list of numbers; ConfigError names what is wrong."""
    if isinstance(raw, str):
        cpus = _parse_text(raw)
    elif isinstance(raw, list | tuple) and all(
        isinstance(item, int) and not isinstance(item, bool) for item in raw
    ):
        cpus = frozenset(raw)
    else:
        raise errors.ConfigError(
            f'worker: cpus must be a CPU list such as "0-3,6" or [0, 1], got {raw!r}'
        )
    if not cpus:
        raise errors.ConfigError("worker: cpus must name at least one CPU")
    negative = sorted(cpu for cpu in cpus if cpu < 0)
    if negative:
        raise errors.ConfigError(f"worker: cpus must be CPU numbers >= 0, got {negative[0]}")
    return cpus


def _parse_text(text: str) -> frozenset[int]:
    cpus: set[int] = set()
    for part in (piece.strip() for piece in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise errors.ConfigError(
                f'worker: cpus: {part!r} is not a CPU number or range (as in "0-3,6")'
            ) from None
        if high < low:
            raise errors.ConfigError(f"worker: cpus: range {part!r} runs backwards")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The shortest ``"0-3,6"`` form of a set of CPUs."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = 0
    for index, cpu in enumerate(ordered):
        last_of_run = index + 1 == len(ordered) or ordered[index + 1] != cpu + 1
        if last_of_run:
            low = ordered[start]
            ranges.append(str(cpu) if low == cpu else f"{low}-{cpu}")
            start = index + 1
    return ",".join(ranges)


def check_available(cpus: frozenset[int]) -> None:
    """Refuse CPUs this process may not use (absent, offline or outside its cgroup)."""
    available = frozenset(os.sched_getaffinity(0))
    missing = cpus - available
    if missing:
        raise errors.ConfigError(
            f"worker: cpus {format_cpu_list(missing)} not available to this process "
            f"(available: {format_cpu_list(available)})"
        )


def pin_process(cpus: frozenset[int]) -> None:
    """Pin every thread of this process, and so every child it starts later, to ``cpus``."""
    # sched_setaffinity acts on one thread; a store thread may already be running.
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), cpus)
