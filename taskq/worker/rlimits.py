"""Applying ``Limits`` to the current process, and measuring a job, inside a sandbox child.

The limits are set by the child itself after it starts, not by a
``preexec_fn`` in the worker: ``preexec_fn`` is unsafe in a process with
threads, and the worker runs an event loop with worker threads.

Two ways to apply them:

- ``confine`` (a process that runs one job, then exits): soft and hard limits
  both set to the job's, so the job cannot raise them again.
- ``set_pool_ceiling`` once when a pool child starts, then ``confine_pool_job``
  before each job: the hard limits are the worker's maximums and each job
  gets soft limits of its own. Soft limits can move freely under the hard
  ones, so a pool child never has to be replaced for a job with different
  limits. The price: a job can raise its soft limits back up to the worker's
  maximums, so pool mode is for trusted code.

RLIMIT_CPU counts the process's whole life, so a pool job's CPU limit is
``cpu used so far + job limit``, rounded up to whole seconds (the job may get
up to one second more). A pool child's hard CPU limit stays unlimited
because its total over many jobs has no useful bound; the wall-clock timeout
is the backstop if a job ignores SIGXCPU.
"""

from __future__ import annotations

import contextlib
import math
import resource
from dataclasses import dataclass

from taskq.broker.limits import Limits

# The kernel sends SIGXCPU at the soft limit and SIGKILL at the hard limit; one
# second between them lets SIGXCPU arrive first, so the outcome reads clearly.
_CPU_GRACE_SECONDS = 1
_KIB = 1024
# RLIMIT_CORE is always 0: a crashing job's core dumps (SIGSEGV, SIGXCPU and
# SIGABRT all dump) would otherwise pile up on the worker's disk.


def confine(limits: Limits) -> None:
    """Limit this process, for good, to ``limits``."""
    _set(resource.RLIMIT_CORE, 0, 0)
    _set(resource.RLIMIT_NOFILE, limits.open_files, limits.open_files)
    _set(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + _CPU_GRACE_SECONDS)
    # Last: the calls above must not be starved of memory by a tiny limit.
    _set(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes)


def set_pool_ceiling(worker_max: Limits) -> None:
    """Fix a pool child's hard limits at the worker's maximums, before any job runs."""
    _set(resource.RLIMIT_CORE, 0, 0)
    _set(resource.RLIMIT_NOFILE, worker_max.open_files, worker_max.open_files)
    _set(resource.RLIMIT_AS, worker_max.memory_bytes, worker_max.memory_bytes)


def confine_pool_job(limits: Limits) -> None:
    """Set a pool child's soft limits for its next job (within the ceiling)."""
    _set(resource.RLIMIT_NOFILE, limits.open_files, resource.RLIM_INFINITY)
    cpu_limit = math.ceil(own_cpu_seconds() + limits.cpu_seconds)
    _set(resource.RLIMIT_CPU, cpu_limit, resource.RLIM_INFINITY)
    _set(resource.RLIMIT_AS, limits.memory_bytes, resource.RLIM_INFINITY)


def own_cpu_seconds() -> float:
    """CPU time this process has used: what RLIMIT_CPU counts."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True, slots=True)
class JobUsage:
    """A pool child's counters when a job starts, to report what that job alone used."""

    cpu_seconds: float
    children_peak_rss_kib: int

    @classmethod
    def start(cls) -> JobUsage:
        """Take the counters and reset the peak-RSS mark, just before a job runs."""
        # "5" resets VmHWM (Linux >= 4.0). Where /proc refuses, VmHWM stays the
        # process's lifetime peak: an upper bound for the job's.
        with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(_cpu_with_children(), children.ru_maxrss)

    def finish(self) -> tuple[float, int]:
        """CPU seconds and peak RSS bytes of the job (and the children it waited for)."""
        cpu_seconds = _cpu_with_children() - self.cpu_seconds
        peak_kib = _own_peak_rss_kib()
        # RUSAGE_CHILDREN's peak covers every child ever reaped; if it rose
        # during this job, one of this job's children set it.
        children_peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if children_peak_kib > self.children_peak_rss_kib:
            peak_kib = max(peak_kib, children_peak_kib)
        return cpu_seconds, peak_kib * _KIB


def _cpu_with_children() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own_cpu_seconds() + children.ru_utime + children.ru_stime


def _own_peak_rss_kib() -> int:
    """VmHWM, the peak RSS since ``JobUsage.start`` reset it (ru_maxrss cannot be reset)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise OSError("/proc/self/status has no VmHWM line")


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
