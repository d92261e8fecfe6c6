"""Processes found and stopped by pid, read from ``/proc``; free loopback ports.

A pid alone may name a later process once its own has exited, so a process
this module did not start (a recorded node or worker) is recognised by a
marker in its command line, and one it saw running by its start time.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

HOST = "127.0.0.1"
# How long a process may take to go once SIGKILL is sent.
_KILL_WAIT_SECONDS = 5.0


def _stat_fields(pid: int, *, thread: int | None = None) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` (of one of its threads: ``task/TID/stat``) after
    the command name, or None if it is gone."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        with open(path) as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (to tell a pid from a later reuse), None if gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, however deep."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts as gone: it runs nothing)."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] in {"Z", "X"}


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (SIGSTOP reaches them one by one); a
    process gone counts as stopped."""
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return True
    states = (_stat_fields(pid, thread=tid) for tid in threads)
    return all(fields is None or fields[0] == "T" for fields in states)


def runs_with(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive and its command line holds ``marker`` (so it is ours)."""
    if process_gone(pid):
        return False
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return marker.encode() in command_line


def wait_until(condition: Callable[[], bool], timeout: float, *, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def read_pid(path: Path) -> int | None:
    """The pid recorded in ``path``, or None when there is none."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def stop_recorded(processes: Sequence[tuple[int, str]], timeout: float) -> list[int]:
    """SIGTERM each ``(pid, marker)`` still running with its marker, wait, SIGKILL the rest.

    Returns the pids that were running. For processes another command
    started: they are not this process's children, so cannot be waited for.
    """
    running = [(pid, marker) for pid, marker in processes if runs_with(pid, marker)]
    for pid, _ in running:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    wait_until(lambda: all(process_gone(pid) for pid, _ in running), timeout, interval=0.1)
    for pid, marker in running:
        if runs_with(pid, marker):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # A killed process takes a moment to go, and the caller may ask whether it has.
    wait_until(lambda: all(process_gone(pid) for pid, _ in running), _KILL_WAIT_SECONDS)
    return [pid for pid, _ in running]


# Where free_ports looks: below the kernel's range of ports for a connection's own end.
_LOWEST_PORT = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports free now, below the ports the kernel gives connections.

    A port from that range (the kernel's choice for ``bind(0)``) can be taken as
    a connection's own end before the server meant for it binds it; worse, a
    connection to it while nothing listens yet can meet itself (TCP's
    simultaneous open), and the client then reads its own request back as the
    answer. Where the range leaves no room below it, the kernel chooses.
    """
    ports = server_ports()
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            sock = socket.socket()
            sockets.append(sock)
            port = random.choice(ports) if ports else 0
            try:
                sock.bind((HOST, port))
            except OSError:  # taken: try another
                sockets.pop().close()
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def server_ports() -> range:
    """The loopback ports only a server binds: above the privileged ones, below those the
    kernel gives connections (empty where that range leaves no room)."""
    return range(_LOWEST_PORT, _ephemeral_start())


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def port_is_free(port: int) -> bool:
    """Whether ``port`` on loopback can be bound now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True
