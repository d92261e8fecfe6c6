"""The keeper: a small process between the worker and a job, so no job outlives its right to run.

Every sandbox child splits in two as it starts, before it runs any job
code. The process the worker started stays behind as the *keeper*; its
forked child, the *job process*, runs the jobs in a process group of its
own. The keeper runs no job code, so a job cannot hold it up (a long C call
holding the GIL, a deadlock): it sleeps in ``poll`` and ends the job, with
every process the job started, the moment any of these happens:

- **The worker dies.** The kernel sends the keeper SIGTERM (the
  parent-death signal), and the socket from the worker reaches end of
  file; either is enough, and a changed parent pid, checked at every
  wake-up, is a third line.
- **The lease deadline passes.** The worker keeps the monotonic time by
  which its jobs must be dead unless their leases are renewed in memory it
  shares with every keeper (see ``lease_deadline``), and moves it on after
  each renewal. A worker that is frozen, or cut off from the store, moves
  it no more, so its jobs die before the store lets another worker claim them.
- **The job's wall clock runs out.** The job process writes each job's
  deadline into memory shared with the keeper, which kills the job a little
  after it (the worker's own timer normally comes first, and names the
  outcome).
- **The job has used its CPU time.** The worker writes the running job's
  ``cpu_seconds`` into memory it shares with this keeper alone (``CpuBudget``:
  handed over on the keeper's socket, received after the fork, so no job
  code ever maps it). The keeper measures the CPU time of everything below
  it, the job's control group where it has one (``JobGroups.cpu_seconds``),
  else the processes in /proc, from when it first sees the job (a pool
  child's first job: once the child has said ``ready``), and kills the job
  once that passes the budget plus the grace RLIMIT_CPU gives
  (``CPU_GRACE_SECONDS``). RLIMIT_CPU, set inside the job, normally
  stops it first; this holds when the job raised its own limit.
- **The worker asks** (it closes its side of the socket; SIGTERM works too),
  or **the job process ends.**

Then the keeper kills the job's process group, then every process left
below it: the keeper is a child subreaper, so a process that double-forked
and called ``setsid`` is re-parented to it rather than to init, and is
found among its children. It reaps them all, tells the worker why it acted
(a byte on the socket: ``L`` lease, ``W`` wall clock, ``C`` CPU time), and exits the way the
job process did (its exit status, or its signal), so the worker reads the
job's end from the keeper's, with the job's resource usage in its rusage.

The job process gets SIGKILL from the kernel if the keeper dies, whatever
the reason.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import resource
import select
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from taskq.worker.sandbox import linux
from taskq.worker.sandbox.cgroups import CgroupPlan, JobGroups

if TYPE_CHECKING:
    from taskq.broker.limits import Limits

CPU_GRACE_SECONDS = 1
"""The kernel sends SIGXCPU at the soft limit and SIGKILL at the hard limit
(``rlimits``); one second between them lets SIGXCPU arrive first, so the
outcome reads clearly. The keeper's own CPU watch allows as much."""

LEASE_ENDED = b"L"
WALL_CLOCK_ENDED = b"W"
CPU_ENDED = b"C"

_DEADLINE = struct.Struct("d")
# The job's number (0: none yet) and the CPU seconds it may use.
_CPU_BUDGET = struct.Struct("=Qq")

# The keeper looks at both deadlines at least this often: the worker and the
# job process write them without waking the keeper, which costs nothing per job.
_LOOK_SECONDS = 0.25
# After the wall-clock deadline: the worker's timer should have ended the job
# by then, and its kill names the outcome more precisely.
WALL_CLOCK_GRACE_SECONDS = 0.5
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class JobClock:
    """The job process's side: when the current job must be over, and its groups' bounds."""

    def __init__(self, shared: mmap.mmap, groups: JobGroups | None, moved_fd: int) -> None:
        self._shared = shared
        self._groups = groups
        self._moved_fd: int | None = moved_fd

    def wait_until_contained(self) -> None:
        """Return once the keeper has moved this process into its control groups.

        Before any code but taskq's own runs here: a job's, or a module's the
        worker imports. A keeper gone before it said so leaves nothing to
        wait for, and the kernel's SIGKILL (the parent-death signal) on its way.
        """
        if self._moved_fd is None:
            return
        fd, self._moved_fd = self._moved_fd, None
        try:
            said = os.read(fd, 1)
        finally:
            os.close(fd)
        if not said:
            os._exit(1)

    def job_started(self, limits: Limits) -> None:
        """A job starts now, within ``limits`` (its wall clock, process cap, memory)."""
        if self._groups is not None:
            self._groups.apply(limits)
        _DEADLINE.pack_into(self._shared, 0, time.monotonic() + limits.wall_seconds)

    def job_ended(self) -> None:
        """No job runs now: the keeper has no wall clock to enforce."""
        _DEADLINE.pack_into(self._shared, 0, 0.0)


class CpuBudget:
    """The worker's side: the CPU time the job now running may use, for the keeper to enforce.

    The memory is the worker's and the keeper's only: the keeper receives it
    after it forked the job process.
    """

    def __init__(self) -> None:
        self._fd: int | None = os.memfd_create("taskq-cpu-budget", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self._fd, _CPU_BUDGET.size)
            self._shared = mmap.mmap(self._fd, _CPU_BUDGET.size)
        except BaseException:
            os.close(self._fd)
            raise
        self._jobs = 0

    def hand_over(self, channel: socket.socket) -> None:
        """Send the memory to the keeper on its socket (sent before it starts, read as it keeps)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                socket.send_fds(channel, [b"B"], [fd])
            finally:
                os.close(fd)

    def job_started(self, cpu_seconds: int) -> None:
        """A job that may use ``cpu_seconds`` of CPU time starts now (or has just started)."""
        self._jobs += 1
        # Written without a lock: a reading torn between two jobs is put right at the next look.
        _CPU_BUDGET.pack_into(self._shared, 0, self._jobs, cpu_seconds)

    def close(self) -> None:
        self._shared.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _CpuWatch:
    """The keeper's side of ``CpuBudget``: whether the job has used more CPU time than it may."""

    def __init__(self, shared: mmap.mmap | None, groups: JobGroups | None) -> None:
        self._shared = shared
        self._groups = groups
        self._job = 0
        self._from: tuple[bool, float] = (False, 0.0)  # counted by the group?, CPU seconds

    def used_up(self) -> bool:
        if self._shared is None:
            return False
        job: int
        allowed: int
        job, allowed = _CPU_BUDGET.unpack_from(self._shared, 0)
        if job == 0:
            return False
        counted = None if self._groups is None else self._groups.cpu_seconds()
        now = (True, counted) if counted is not None else (False, _below_here())
        if job != self._job or now[0] != self._from[0]:
            # A job's CPU counts from the first look after its start, at most
            # a quarter second late: under, never over, what it used.
            self._job, self._from = job, now
            return False
        return now[1] - self._from[1] > allowed + CPU_GRACE_SECONDS


def _below_here() -> float:
    return linux.descendants_cpu_seconds(os.getpid())


def _receive_cpu_budget(keeper: socket.socket) -> mmap.mmap | None:
    """The worker's ``CpuBudget``, sent before this keeper started; ``None`` if none came."""
    try:
        _, fds, _, _ = socket.recv_fds(keeper, 1, 1)
    except BlockingIOError:
        return None
    if not fds:
        return None
    try:
        return mmap.mmap(fds[0], _CPU_BUDGET.size)
    finally:
        os.close(fds[0])


def split(
    *,
    keeper_fd: int,
    worker_pid: int,
    kill_by: Callable[[], float],
    job_fds: tuple[int, ...],
    cgroups: CgroupPlan | None,
) -> JobClock:
    """Fork the job process; return in it. The keeper never returns from here.

    ``job_fds`` are the job process's channels to the worker, which the keeper
    closes; ``keeper_fd`` is the keeper's, which the job process closes.
    ``kill_by`` reads the worker's lease deadline. The keeper moves the job
    process into control groups of its own where ``cgroups`` says, while the
    job process imports what runs jobs: the first such move in a while waits
    for the kernel (an RCU grace period, 5-16 ms on a VM), which then costs
    the job process nothing. It waits for the move before any job code
    (:meth:`JobClock.wait_until_contained`).
    """
    # First of all, so that no moment passes in which the worker could die unnoticed.
    linux.set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != worker_pid:
        os._exit(1)  # the worker died before the signal was armed: nothing to keep
    linux.become_subreaper()
    # Jobs crash with signals that dump core by default; so may the keeper, mirroring them.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    shared = mmap.mmap(-1, _DEADLINE.size)
    keeper_pid = os.getpid()
    groups = None if cgroups is None else JobGroups(cgroups, keeper_pid)
    moved_read, moved_write = os.pipe2(os.O_CLOEXEC)
    job_pid = os.fork()
    if job_pid == 0:
        os.close(moved_write)
        os.setpgid(0, 0)
        linux.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != keeper_pid:
            os._exit(1)
        os.close(keeper_fd)
        return JobClock(shared, groups, moved_read)
    os.close(moved_read)
    if groups is not None:
        groups.join(job_pid)
    # A job process already gone closed the pipe: the keeping below sees it end.
    with contextlib.suppress(OSError):
        os.write(moved_write, b"M")
    os.close(moved_write)
    for fd in job_fds:
        os.close(fd)
    # Nothing of the job's reads from here: its stdin stays /dev/null, and the
    # keeper's own stdout goes there too. Its stderr stays on the job's
    # output pipe, where anything it has to say is read.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    _keep(socket.socket(fileno=keeper_fd), job_pid, shared, worker_pid, kill_by, groups)


def _keep(
    keeper: socket.socket,
    job_pid: int,
    shared: mmap.mmap,
    worker_pid: int,
    kill_by: Callable[[], float],
    groups: JobGroups | None,
) -> NoReturn:
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for number in _STOP_SIGNALS:
        signal.signal(number, _note_signal)
    keeper.setblocking(False)
    cpu = _CpuWatch(_receive_cpu_budget(keeper), groups)
    job_fd = os.pidfd_open(job_pid)
    poller = select.poll()
    for fd in (keeper.fileno(), job_fd, wake_read):
        poller.register(fd, select.POLLIN)
    reason = b""
    while True:
        now = time.monotonic()
        lease_deadline = kill_by()
        (job_deadline,) = _DEADLINE.unpack_from(shared, 0)
        wall_deadline = job_deadline + WALL_CLOCK_GRACE_SECONDS if job_deadline else math.inf
        if now >= lease_deadline:
            reason = LEASE_ENDED
            break
        if now >= wall_deadline:
            reason = WALL_CLOCK_ENDED
            break
        if cpu.used_up():
            reason = CPU_ENDED
            break
        wait = min(lease_deadline, wall_deadline, now + _LOOK_SECONDS) - now
        ready = {fd for fd, _ in poller.poll(wait * 1000)}
        # Past the CPU budget the worker sends nothing on the socket: readable
        # means end of file, the worker gone or asking for the stop.
        if ready or os.getppid() != worker_pid:
            break
    if reason:
        with contextlib.suppress(OSError):
            keeper.send(reason)
    if groups is not None:
        groups.kill()
    status = sweep(job_pid)
    if groups is not None:
        groups.remove()
    _mirror(status)


def _note_signal(number: int, frame: object) -> None:
    """Nothing: the wake-up pipe has already told the loop."""


def sweep(job_pid: int) -> int | None:
    """Kill the job process's group and every process left below the keeper; reap them all.

    Returns the job process's wait status (``None`` if it was reaped before).
    Every process killed here is a child of this one, not yet reaped, so its
    pid cannot have been reused: the kill reaches the process meant.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job_pid, signal.SIGKILL)
    status = None
    while True:
        for pid in linux.own_children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        if pid == job_pid:
            status = wait_status


def _mirror(status: int | None) -> NoReturn:
    """Exit as the job process did, so the worker reads the job's end from the keeper's."""
    if status is None or os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status) if status is not None else 1)
    number = os.WTERMSIG(status)
    with contextlib.suppress(OSError, ValueError):
        signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # a signal whose default is to carry on
