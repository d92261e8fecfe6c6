"""A sandbox child as the worker holds it: spawned, stopped, reaped with rusage.

The process the worker starts is the child's keeper (see ``keeper``), which
forks the process that runs the jobs. The worker never signals the job
itself: it asks the keeper (by closing its side of the keeper's socket),
which kills the job's process group and every process left below it, then
exits the way the job did. A keeper that does not exit within
``KEEPER_PATIENCE_SECONDS`` of being asked is killed outright, which is safe
from pid reuse: an unreaped child, even a zombie, keeps its pid.

Children are started from one thread kept for the worker's whole life (the
first from its main thread, before anything else: ``first_children``): the
kernel's parent-death signal fires when the *thread* that started a process
ends, and a pooled thread that went idle would end and set it off.

The keeper is reaped with ``os.wait4`` rather than ``Popen.wait`` for its
rusage: peak RSS and CPU time of the child and the children it waited for.
A pidfd (Linux >= 5.3) says when the child has exited without reaping it, so
the event loop watches it beside the child's pipes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import msgspec

from taskq.broker.limits import Limits
from taskq.worker.sandbox.cgroups import CgroupPlan
from taskq.worker.sandbox.keeper import CpuBudget
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.sandbox.rlimits import KIB, own_peak_rss_bytes

if TYPE_CHECKING:
    import concurrent.futures

Mode = Literal["once", "pool", "exec"]

KEEPER_PATIENCE_SECONDS = 5.0


@functools.cache
def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The thread children are started from, for the worker's whole life (see above)."""
    # Imported with the first child started from it, not before the worker's
    # first child, which its main thread starts (``first_children``).
    import concurrent.futures

    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="taskq-spawn")


class ChildSetup(msgspec.Struct, frozen=True):
    """What every child of one worker starts with, whatever its mode."""

    env: Mapping[str, str]
    """The whole environment the child and its jobs get (see ``job_environment``)."""
    deadline: LeaseDeadline | None = None
    """The worker's lease deadline, which the child's keeper enforces."""
    cgroups: CgroupPlan | None = None
    """Where the keeper makes control groups for its job process."""
    modules: tuple[str, ...] = ()
    """The worker's modules, which a pool child imports as it starts (see ``module_imports``)."""
    import_path: tuple[str, ...] | None = None
    """Where a pool child imports them from (``None``: its own ``sys.path``)."""


class Ended(msgspec.Struct, frozen=True):
    """How a child process ended, and what it used over its whole life."""

    exit_code: int | None
    signal: int | None
    peak_rss_bytes: int
    """0 when unknown: the child never went past the worker's own peak (see ``reap``)."""
    cpu_seconds: float


class ChildProcess:
    """A running sandbox child with its control socket, output pipe and pidfd.

    Not thread-safe: one thread at a time drives it.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        control: socket.socket,
        keeper_channel: socket.socket,
        output_fd: int,
        marker: str,
        cpu_budget: CpuBudget,
        stdout_fd: int | None = None,
    ) -> None:
        self._popen = popen
        # The kernel starts a child's ru_maxrss from its parent's peak RSS (and
        # carries it across exec): read after the spawn, as the peak only grows.
        self._inherited_peak_rss_bytes = own_peak_rss_bytes()
        self.marker = marker
        """A pool child's output marker token (see ``protocol.output_marker``)."""
        self.pid = popen.pid
        self.control = control
        self._keeper = keeper_channel
        self._cpu_budget = cpu_budget
        self.output_fd = output_fd
        self.stdout_fd = stdout_fd
        """An exec child's stdout, apart from its stderr (on ``output_fd``): a command's result."""
        self.pidfd = os.pidfd_open(popen.pid)
        self._reaped = False

    @classmethod
    def spawn(
        cls,
        mode: Mode,
        setup: ChildSetup,
        *,
        ceiling: Limits | None = None,
        report_fd: int | None = None,
    ) -> concurrent.futures.Future[ChildProcess]:
        """Start ``python -m taskq.worker.sandbox.child`` in ``mode``, from the spawning thread.

        The child runs in a new session. ``ceiling`` (pool mode) is passed on
        as the child's hard limits, with a fresh token for the markers between
        its jobs' output; a pool child imports ``setup.modules`` before its
        first job and writes how that went to ``report_fd`` (if given; closed
        here once the child has it). The child's keeper holds its jobs to
        ``setup.deadline``. Block on the future's ``result()`` in a thread, or
        wrap it in the event loop.
        """
        return _spawner().submit(cls.start, mode, setup, ceiling=ceiling, report_fd=report_fd)

    @classmethod
    def start(
        cls,
        mode: Mode,
        setup: ChildSetup,
        *,
        ceiling: Limits | None = None,
        report_fd: int | None = None,
    ) -> ChildProcess:
        """``spawn``, blocking, from the calling thread: one that lives as long as the
        worker, as its main thread does (the child's parent-death signal is the thread's)."""
        cpu_budget = CpuBudget()
        control, child_control = socket.socketpair()
        keeper_channel, child_keeper = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        output_fd, child_output_fd = os.pipe()
        # A command's stdout is its result: a pipe of its own, kept apart from stderr.
        stdout_fd, child_stdout_fd = os.pipe() if mode == "exec" else (None, child_output_fd)
        # -P: not the folder it starts in first on its import path, as ``-m`` would
        # put it: a taskq.py there (a user's, or one a job wrote) would run in
        # the keeper, outside the job's limits, instead of taskq's own code.
        argv = [sys.executable, "-u", "-P", "-m", "taskq.worker.sandbox.child", mode]
        argv += ["--control-fd", str(child_control.fileno())]
        argv += ["--keeper-fd", str(child_keeper.fileno()), "--worker-pid", str(os.getpid())]
        passed = [child_control.fileno(), child_keeper.fileno()]
        if setup.deadline is not None:
            argv += ["--deadline-fd", str(setup.deadline.fileno())]
            passed.append(setup.deadline.fileno())
        if setup.cgroups is not None and setup.cgroups.groups():
            argv += ["--cgroups", setup.cgroups.to_json()]
        marker = os.urandom(8).hex()
        if ceiling is not None:
            argv += ["--ceiling", _json(ceiling.to_dict()), "--marker", marker]
        if mode == "pool" and setup.modules:
            argv += ["--modules", ",".join(setup.modules)]
            if setup.import_path is not None:
                argv += ["--import-path", _json(setup.import_path)]
            if report_fd is not None:
                argv += ["--report-fd", str(report_fd)]
                passed.append(report_fd)
        try:
            # Waits in the socket for the keeper, which reads it once it has forked the job.
            cpu_budget.hand_over(keeper_channel)
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=child_stdout_fd,
                stderr=child_output_fd,
                pass_fds=passed,
                start_new_session=True,
                env=setup.env,
            )
        except BaseException:
            control.close()
            keeper_channel.close()
            cpu_budget.close()
            for fd in (output_fd, stdout_fd):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            child_control.close()
            child_keeper.close()
            if report_fd is not None:
                os.close(report_fd)
            os.close(child_output_fd)
            if stdout_fd is not None:
                os.close(child_stdout_fd)
        control.setblocking(False)
        keeper_channel.setblocking(False)
        os.set_blocking(output_fd, False)
        if stdout_fd is not None:
            os.set_blocking(stdout_fd, False)
        return cls(popen, control, keeper_channel, output_fd, marker, cpu_budget, stdout_fd)

    def hold_to_cpu(self, cpu_seconds: int) -> None:
        """A job starts now: its keeper kills it once it has used ``cpu_seconds`` (and the grace).

        What holds when the job raised its own RLIMIT_CPU (see ``keeper``).
        """
        self._cpu_budget.job_started(cpu_seconds)

    def ended_by_keeper(self) -> bytes:
        """Why the keeper ended the job by itself (``keeper.LEASE_ENDED``...); ``b""`` if not."""
        try:
            return self._keeper.recv(16)
        except OSError:
            return b""

    def has_exited(self) -> bool:
        """Whether the child has exited (it may still need reaping), or its job process
        has and the keeper is about to follow; never blocks."""
        # poll, not select: a busy worker's descriptors may exceed select's 1024.
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        # Only the job process holds the other end of the control channel (the
        # keeper closed its copy): its hang-up says the job process is gone before
        # the keeper has noticed and exited.
        poller.register(self.control, select.POLLRDHUP)
        return any(
            fd == self.pidfd or events & (select.POLLHUP | select.POLLRDHUP)
            for fd, events in poller.poll(0)
        )

    def kill_job(self) -> None:
        """Have the keeper kill the job and every process it started; a no-op once reaped.

        The worker closes its side of the keeper's socket: the keeper reads
        end of file as "stop", whether it is sleeping in its loop or still
        starting up (a signal then would find no handler yet).
        """
        if self._reaped:
            return
        with contextlib.suppress(OSError):
            self._keeper.shutdown(socket.SHUT_WR)

    def reap(self, patience: float = KEEPER_PATIENCE_SECONDS) -> Ended:
        """Wait for the child to exit (blocking) and collect its status and rusage.

        A keeper that has not exited within ``patience`` seconds is killed outright.
        """
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        if not poller.poll(patience * 1000):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        _, status, usage = os.wait4(self.pid, 0)
        self._reaped = True
        peak_rss_bytes = usage.ru_maxrss * KIB
        if peak_rss_bytes <= self._inherited_peak_rss_bytes:
            peak_rss_bytes = 0  # the worker's peak, not the child's: the child's is unknown
        # Tell Popen the child is gone, so it neither waits for it nor warns.
        self._popen.returncode = os.waitstatus_to_exitcode(status)
        return Ended(
            exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            peak_rss_bytes=peak_rss_bytes,
            cpu_seconds=usage.ru_utime + usage.ru_stime,
        )

    def close(self) -> None:
        """Kill and reap the child if need be, then release its descriptors."""
        if not self._reaped:
            self.kill_job()
            self.reap()
        self.control.close()
        self._keeper.close()
        os.close(self.output_fd)
        if self.stdout_fd is not None:
            os.close(self.stdout_fd)
        os.close(self.pidfd)
        self._cpu_budget.close()


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()
