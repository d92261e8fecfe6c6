"""Several OS processes started together on one task, each stopped by pid whatever happens.

Each process runs ``target(*args, barrier, out)``: it waits at the barrier so
all start at once, then puts one result on ``out`` (or the text of the
exception that stopped it, which fails the test with that text).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any


@contextmanager
def started_together(
    target: Callable[..., None], args: Sequence[Any], count: int, *, timeout: float = 180
) -> Iterator[Callable[[], list[Any]]]:
    """Start ``count`` processes; yield a function that waits for all their results."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    out = context.Queue()
    processes = [context.Process(target=target, args=(*args, barrier, out)) for _ in range(count)]
    for process in processes:
        process.start()

    def collect() -> list[Any]:
        results = [out.get(timeout=timeout) for _ in processes]
        failures = [result for result in results if isinstance(result, str)]
        assert not failures, failures
        return results

    try:
        yield collect
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)


def run_together(
    target: Callable[..., None], args: Sequence[Any], count: int, *, timeout: float = 180
) -> list[Any]:
    """Run ``count`` processes at once and return their results."""
    with started_together(target, args, count, timeout=timeout) as collect:
        return collect()
