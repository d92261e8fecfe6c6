"""Applying ``Limits`` to the current process, and measuring a job, inside a sandbox child.

The limits are set by the child itself after it starts, not by a
``preexec_fn`` in the worker: ``preexec_fn`` is unsafe in a process with
threads, and the worker runs an event loop with worker threads.

A job must not lift a limit it was given, so its hard limits are its own and
the process gives up CAP_SYS_RESOURCE once they are set: without it not even
root may raise a hard limit (``setrlimit(2)``). Two ways to apply them:

- ``confine`` (a process that runs one job, then exits): soft and hard limits
  both set to the job's.
- ``PoolLimits`` in a pool child: its hard limits start at the worker's
  maximums, and each job lowers soft and hard open files and address space
  to its own. Lowering a hard limit cannot be undone, so a job asking for
  more than the job before was given is not run there (``allows``): the
  worker runs it in a fresh child. A pool child's jobs nearly all share
  their limits, so few are.

RLIMIT_CPU counts the process's whole life, so a pool job's CPU limit is
``cpu used so far + job limit``, rounded up to whole seconds (the job may get
up to ``POOL_CPU_ROUNDING_SECONDS`` more). A pool child's hard CPU limit stays
unlimited, since the next job needs more than this one, so a pool job could
raise its soft one: the keeper, outside the job, measures the job's CPU time
and kills it past its limit, that rounding and ``keeper.CPU_GRACE_SECONDS``.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource

import msgspec

from taskq.broker.limits import Limits
from taskq.worker.sandbox import linux
from taskq.worker.sandbox.keeper import CPU_GRACE_SECONDS

KIB = 1024
"""The unit of ``ru_maxrss`` and of /proc's memory figures on Linux."""
POOL_CPU_ROUNDING_SECONDS = 1
"""At most this much more CPU time than its limit reaches a pool job before
its soft RLIMIT_CPU, a whole number of seconds, sends SIGXCPU. The keeper's
watch allows it on top of its grace: without it, a child that had used
1.01 s before a 1 s job sent that job SIGXCPU at 1.99 s of its CPU and the
keeper SIGKILL at 2 s, within one of the keeper's looks of each other (CI
once saw a spinning pool job end by SIGKILL)."""
# RLIMIT_CORE is always 0: a crashing job's core dumps (SIGSEGV, SIGXCPU and
# SIGABRT all dump) would otherwise pile up on the worker's disk.


def confine(limits: Limits) -> None:
    """Limit this process, for good, to ``limits``."""
    _set(resource.RLIMIT_CORE, 0, 0)
    _set(resource.RLIMIT_NOFILE, limits.open_files, limits.open_files)
    _set(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + CPU_GRACE_SECONDS)
    # Last: the calls above must not be starved of memory by a tiny limit.
    _set(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes)
    linux.drop_capability(linux.CAP_SYS_RESOURCE)


class PoolLimits:
    """A pool child's limits: hard ones that follow its jobs down, and a soft CPU limit per job."""

    def __init__(self, worker_max: Limits) -> None:
        _set(resource.RLIMIT_CORE, 0, 0)
        _set(resource.RLIMIT_NOFILE, worker_max.open_files, worker_max.open_files)
        _set(resource.RLIMIT_AS, worker_max.memory_bytes, worker_max.memory_bytes)
        linux.drop_capability(linux.CAP_SYS_RESOURCE)
        # A job asking for more than the system let this child start with gets
        # that much, here as in any fresh child: never a reason to move it.
        self._ceiling = {
            limit: resource.getrlimit(limit)[1]
            for limit in (resource.RLIMIT_NOFILE, resource.RLIMIT_AS)
        }

    def allows(self, limits: Limits) -> bool:
        """Whether this child can hold a job to ``limits``: no hard limit is below the job's."""
        for limit, wanted in self._wanted(limits):
            if _within(wanted, resource.getrlimit(limit)[1]) < wanted:
                return False
        return True

    def confine_job(self, limits: Limits, cpu_used: float) -> None:
        """Set the limits for the next job, which ``allows``; ``cpu_used`` is this process's CPU."""
        _set(resource.RLIMIT_CPU, math.ceil(cpu_used + limits.cpu_seconds), resource.RLIM_INFINITY)
        # Address space last: the calls before must not be starved of memory by a tiny limit.
        for limit, wanted in self._wanted(limits):
            resource.setrlimit(limit, (wanted, wanted))

    def _wanted(self, limits: Limits) -> tuple[tuple[int, int], ...]:
        """The job's open files and address space, each within this child's ceiling."""
        asked = (
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_AS, limits.memory_bytes),
        )
        return tuple((limit, _within(wanted, self._ceiling[limit])) for limit, wanted in asked)


def _within(value: int, hard: int) -> int:
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def own_cpu_seconds() -> float:
    """CPU time this process has used: what RLIMIT_CPU counts."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class JobUsage(msgspec.Struct, frozen=True):
    """What one pool job used: CPU seconds, peak RSS bytes, and the child's CPU total after it."""

    cpu_seconds: float
    peak_rss_bytes: int
    cpu_total_seconds: float
    """The child's CPU (with the children it waited for) when the job ended."""


class _Counters(msgspec.Struct, frozen=True):
    own_cpu: float
    """This process's CPU seconds: what RLIMIT_CPU counts."""
    cpu_total: float
    """With the CPU of the children it waited for."""
    children_peak_kib: int
    """The largest peak RSS of any child it waited for."""


def _read_counters() -> _Counters:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu = own.ru_utime + own.ru_stime
    return _Counters(own_cpu, own_cpu + children.ru_utime + children.ru_stime, children.ru_maxrss)


class JobMeter:
    """Measures a pool child's jobs one after another.

    The /proc files stay open for the child's life, and a job starts from the
    counters its predecessor ended with: a job then costs a few syscalls to
    measure, not file openings. The microseconds the child spends between
    two jobs (sending one result, reading the next message) count towards
    the second, as would a process that a thread left behind by a job
    reaped in that gap.
    """

    def __init__(self) -> None:
        # "5" resets VmHWM (Linux >= 4.0). Where /proc refuses, VmHWM stays the
        # process's lifetime peak: an upper bound for the job's.
        try:
            self._clear_refs: int | None = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError:
            self._clear_refs = None
        self._status = os.open("/proc/self/status", os.O_RDONLY)
        self._at_start: _Counters | None = None
        self._at_last_finish: _Counters | None = None

    def start(self) -> float:
        """Reset the peak-RSS mark just before a job runs.

        Returns this process's own CPU seconds so far: what RLIMIT_CPU counts.
        """
        if self._clear_refs is not None:
            with contextlib.suppress(OSError):
                os.write(self._clear_refs, b"5")
        self._at_start = self._at_last_finish or _read_counters()
        return self._at_start.own_cpu

    def finish(self) -> JobUsage:
        """What the job since ``start`` used (with the children it waited for)."""
        if self._at_start is None:
            raise RuntimeError("finish() before start()")
        at_start, at_end = self._at_start, _read_counters()
        self._at_last_finish = at_end
        peak_kib = self._own_peak_rss_kib()
        # RUSAGE_CHILDREN's peak covers every child ever reaped; if it rose
        # during this job, one of this job's children set it.
        if at_end.children_peak_kib > at_start.children_peak_kib:
            peak_kib = max(peak_kib, at_end.children_peak_kib)
        return JobUsage(at_end.cpu_total - at_start.cpu_total, peak_kib * KIB, at_end.cpu_total)

    def _own_peak_rss_kib(self) -> int:
        """VmHWM, the peak RSS since ``start`` reset it (ru_maxrss cannot be reset)."""
        return _peak_rss_kib(os.pread(self._status, 16 * KIB, 0))


def own_peak_rss_bytes() -> int:
    """This process's peak RSS so far (VmHWM); 0 where /proc does not say."""
    try:
        with open("/proc/self/status", "rb") as status:
            return _peak_rss_kib(status.read()) * KIB
    except OSError:
        return 0


def _peak_rss_kib(status: bytes) -> int:
    found = status.find(b"\nVmHWM:")
    if found < 0:
        raise OSError("/proc/self/status has no VmHWM line")
    line_end = status.index(b"\n", found + 1)
    return int(status[found + len(b"\nVmHWM:") : line_end].split()[0])


def cpu_with_children() -> float:
    """CPU time of this process and of the children it waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own_cpu_seconds() + children.ru_utime + children.ru_stime


def has_children() -> bool:
    """Whether this process has a child process still running (a job left one behind).

    Reaps any exited ones on the way, so zombies a job left do not count.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _set(limit: int, soft: int, hard: int) -> None:
    """Set a limit, never asking for more than the current hard limit allows.

    Only root may raise a hard limit, so a worker maximum above the system's
    (say ``ulimit -Hn``) means the system's; ``RLIM_INFINITY`` as ``hard``
    means "keep the current hard limit".
    """
    current_hard = resource.getrlimit(limit)[1]
    if current_hard != resource.RLIM_INFINITY:
        soft = min(soft, current_hard)
        hard = current_hard if hard == resource.RLIM_INFINITY else min(hard, current_hard)
    resource.setrlimit(limit, (soft, hard))
