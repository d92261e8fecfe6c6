"""A sandbox child as the worker holds it: spawned, signalled by group, reaped with rusage.

The child leads a new session, so its process group holds the job and every
process the job starts (unless one calls ``setsid`` itself). Killing the group
while the child is still unreaped is safe from pid reuse: an unreaped child,
even a zombie, keeps its pid and so its group id.

The child is reaped with ``os.wait4`` rather than ``Popen.wait`` for its
rusage: peak RSS and CPU time of the child and the children it waited for.
A pidfd (Linux >= 5.3) says when the child has exited without reaping it, so
a supervisor can wait on it in one ``select`` with the child's pipes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal

from taskq.broker.limits import Limits
from taskq.worker.rlimits import own_peak_rss_bytes

Mode = Literal["once", "pool", "exec"]

_KIB = 1024


@dataclass(frozen=True, slots=True)
class Ended:
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
        output_fd: int,
        marker: str = "",
    ) -> None:
        self._popen = popen
        # The kernel starts a child's ru_maxrss from its parent's peak RSS (and
        # carries it across exec): read after the spawn, as the peak only grows.
        self._inherited_peak_rss_bytes = own_peak_rss_bytes()
        self.marker = marker
        """A pool child's output marker token (see ``protocol.output_marker``)."""
        self.pid = popen.pid
        self.control = control
        self.output_fd = output_fd
        self.pidfd = os.pidfd_open(popen.pid)
        self._reaped = False

    @classmethod
    def spawn(cls, mode: Mode, *, ceiling: Limits | None = None) -> ChildProcess:
        """Start ``python -m taskq.worker.child`` in ``mode`` in a new session.

        ``ceiling`` (pool mode) is passed on as the child's hard limits, with
        a fresh token for the markers between its jobs' output.
        """
        control, child_control = socket.socketpair()
        output_fd, child_output_fd = os.pipe()
        argv = [sys.executable, "-u", "-m", "taskq.worker.child", mode]
        argv += ["--control-fd", str(child_control.fileno())]
        marker = secrets.token_hex(8)
        if ceiling is not None:
            argv += ["--ceiling", json.dumps(ceiling.to_dict()), "--marker", marker]
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=child_output_fd,
                stderr=child_output_fd,
                pass_fds=(child_control.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            control.close()
            os.close(output_fd)
            raise
        finally:
            child_control.close()
            os.close(child_output_fd)
        control.setblocking(False)
        os.set_blocking(output_fd, False)
        return cls(popen, control, output_fd, marker)

    def has_exited(self) -> bool:
        """Whether the child has exited (it may still need reaping); never blocks."""
        # poll, not select: a busy worker's descriptors may exceed select's 1024.
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def kill_group(self) -> None:
        """SIGKILL the child's whole process group; a no-op once the child is reaped."""
        if self._reaped:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def reap(self) -> Ended:
        """Wait for the child to exit (blocking) and collect its status and rusage."""
        _, status, usage = os.wait4(self.pid, 0)
        self._reaped = True
        peak_rss_bytes = usage.ru_maxrss * _KIB  # KiB on Linux
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
            self.kill_group()
            self.reap()
        self.control.close()
        os.close(self.output_fd)
        os.close(self.pidfd)
