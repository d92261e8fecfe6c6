"""Several OS processes started together on one task, each stopped by pid whatever happens.

Each process runs ``target(*args, barrier, out)``: it waits at the barrier so
all start at once, then puts one result on ``out`` (or the text of the
exception that stopped it, which fails the test with that text).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from taskq.dev.processes import wait_until


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


def stop_session(process: subprocess.Popen[str]) -> None:
    """SIGTERM the process group a shell script started (its workers, a server), then SIGKILL."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_until(lambda: _group_gone(process.pid), timeout=30.0):
        os.killpg(process.pid, signal.SIGKILL)


def _group_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False
