"""What the parts of the bench share: results, percentiles, CPU accounting, paging.

A :class:`Result` is one number with its unit and a note saying how it was
measured; the bench prints them as a table and writes them as JSON.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_list
from taskq.broker.ops.queues import job_counts
from taskq.broker.records import Job, JobState
from taskq.broker.stores.store import Store
from taskq.dev.processes import descendants, runs_with

# The directory that holds the bench package: workers import its jobs from there.
IMPORT_ROOT = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")
FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.DEAD, JobState.CANCELLED)


@contextmanager
def in_background(name: str, work: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run ``work(stop)`` in a thread while the ``with`` block runs; ``stop`` is set at its end."""
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def jobs_pythonpath() -> str:
    """``PYTHONPATH`` for a worker that runs the bench's (or the chaos run's) jobs."""
    return os.pathsep.join(
        part for part in (str(IMPORT_ROOT), os.environ.get("PYTHONPATH", "")) if part
    )


@dataclass
class Result:
    """One measured number: ``store`` is "sqlite", "rqlite" or "-" (no store involved)."""

    store: str
    key: str
    value: float | None
    unit: str
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: Iterable[float], fraction: float) -> float:
    """The nearest-rank percentile (``values`` need not be sorted)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


_STARTED = time.monotonic()


def say(message: str) -> None:
    """Progress on stderr (seconds since the start, then the message); stdout holds the table."""
    print(f"  {time.monotonic() - _STARTED:6.1f}s  {message}", file=sys.stderr, flush=True)


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done within {timeout:g} s")
        time.sleep(interval)


# -- the store, through the broker's public operations ---------------------------------------


def queue_counts(store: Store, queue: str) -> dict[JobState, int]:
    for stats in plan.run(store, job_counts()):
        if stats.queue == queue:
            return stats.counts
    return {state: 0 for state in JobState}


def finished_count(store: Store, queue: str) -> int:
    counts = queue_counts(store, queue)
    return sum(counts.get(state, 0) for state in FINISHED)


def jobs_since(store: Store, queue: str, first_id: int) -> Iterator[Job]:
    """The jobs of ``queue`` with id >= ``first_id``, newest first, a page of 1,000 at a time."""
    before: int | None = None
    while True:
        page = plan.run(store, job_list(queue=queue, before=before, limit=1000))
        for job in page:
            if job.id < first_id:
                return
            yield job
        if len(page) < 1000:
            return
        before = page[-1].id


# -- CPU time, read from /proc ----------------------------------------------------------------


def _stat_fields(path: str) -> list[str] | None:
    try:
        with open(path) as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu(fields: list[str], *, children: bool = False) -> float:
    # After the ")" field 0 is the state; utime, stime, cutime, cstime are 11..14.
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / _TICKS


def process_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` (all its threads), 0 when it is gone."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    return _cpu(fields) if fields else 0.0


def reaped_children_cpu(pid: int) -> float:
    """CPU seconds of the children ``pid`` has waited for."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    return (int(fields[13]) + int(fields[14])) / _TICKS if fields else 0.0


def main_thread_cpu(pid: int) -> float:
    fields = _stat_fields(f"/proc/{pid}/task/{pid}/stat")
    return _cpu(fields) if fields else 0.0


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(f"/proc/{entry}/stat")
            if fields and int(fields[1]) == pid:
                found.append(int(entry))
    return found


def cpu_below(pid: int) -> float:
    """CPU seconds of every process under ``pid``, the ended ones included.

    Each live one's own time and what it has reaped, and what ``pid`` has
    reaped: an ended process's time joins its parent's once reaped.
    """
    # A pool child is two processes, its keeper and, under it, the job process
    # that runs the jobs: the worker's children alone miss the jobs' CPU.
    return reaped_children_cpu(pid) + sum(
        process_cpu(child) + reaped_children_cpu(child) for child in descendants(pid)
    )


def pool_children_idle(pids: Iterable[int], *, least_each: int) -> Callable[[], bool]:
    """A condition for :func:`wait_until`: each worker of ``pids`` has ``least_each`` pool
    children or more, and the processes under the workers, and the CPU they have used,
    are as at the last look.

    The CPU is that of every process under the workers (:func:`cpu_below`): a pool
    child's keeper idles while the job process under it still imports. Not the
    workers' own: an idle worker on rqlite polls.
    """
    workers = list(pids)
    last: list[tuple[list[int], float]] = []

    def idle() -> bool:
        pool = [
            [child for child in children_of(pid) if runs_with(child, _POOL_CHILD)]
            for pid in workers
        ]
        if any(len(children) < least_each for children in pool):
            return False
        below = sorted(process for pid in workers for process in descendants(pid))
        cpu = sum(cpu_below(pid) for pid in workers)
        settled = bool(last) and last[-1][0] == below and cpu - last[-1][1] < _SETTLED_CPU
        last[:] = [(below, cpu)]
        return settled

    return idle


# A pool child's keeper, as its command line names it.
_POOL_CHILD = "taskq.worker.sandbox.child pool"
# Less than a clock tick of /proc's: no CPU used since the last look.
_SETTLED_CPU = 0.005


@dataclass
class CpuSample:
    """CPU seconds so far, by who used them."""

    worker_main: float = 0.0
    worker_threads: float = 0.0
    sandboxes: float = 0.0
    store_server: float = 0.0
    bench: float = 0.0

    def minus(self, earlier: CpuSample) -> CpuSample:
        return CpuSample(
            **{name: getattr(self, name) - getattr(earlier, name) for name in self.__dict__}
        )

    def total(self) -> float:
        return (
            self.worker_main + self.worker_threads + self.sandboxes + self.store_server + self.bench
        )


def cpu_sample(worker_pids: list[int], server_pids: list[int]) -> CpuSample:
    """Who has used how much CPU: workers (main thread, other threads), sandboxes, store, bench.

    A sandbox child's time counts while it lives and, once reaped, in its
    parent's children total; so the job processes under the pool children's
    keepers, and retired pool children, are counted too.
    """
    sample = CpuSample()
    for pid in worker_pids:
        main = main_thread_cpu(pid)
        sample.worker_main += main
        sample.worker_threads += process_cpu(pid) - main
        sample.sandboxes += cpu_below(pid)
    sample.store_server = sum(process_cpu(pid) for pid in server_pids)
    usage = os.times()
    sample.bench = usage.user + usage.system
    return sample


def cpu_breakdown(used: CpuSample, wall: float) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    return {
        "wall_seconds": round(wall, 3),
        "cpu_seconds": {name: round(value, 2) for name, value in used.__dict__.items()},
        "cpu_busy_fraction": round(used.total() / (wall * cores), 3) if wall > 0 else None,
    }


def cpu_note(used: CpuSample, wall: float) -> str:
    cores = os.cpu_count() or 1
    parts = [
        f"worker main {used.worker_main:.1f}",
        f"worker threads {used.worker_threads:.1f}",
        f"sandboxes {used.sandboxes:.1f}",
    ]
    if used.store_server:
        parts.append(f"rqlited {used.store_server:.1f}")
    parts.append(f"bench {used.bench:.1f}")
    busy = used.total() / (wall * cores) if wall > 0 else 0.0
    return f"CPU s: {', '.join(parts)} ({busy:.0%} of {cores} cores)"
