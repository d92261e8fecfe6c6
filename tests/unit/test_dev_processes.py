"""taskq.dev.processes: telling a process stopped in every thread from one still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from taskq.dev.processes import all_threads_stopped, free_ports, wait_until

TWO_THREADS = (
    "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "time.sleep(60)\n"
)


def test_all_threads_stopped_only_once_sigstop_has_reached_every_thread() -> None:
    process = subprocess.Popen([sys.executable, "-c", TWO_THREADS])
    try:
        assert wait_until(lambda: len(os.listdir(f"/proc/{process.pid}/task")) == 2, timeout=10)
        assert not all_threads_stopped(process.pid)
        process.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: all_threads_stopped(process.pid), timeout=10)
        process.send_signal(signal.SIGCONT)
        assert wait_until(lambda: not all_threads_stopped(process.pid), timeout=10)
    finally:
        process.kill()
        process.wait()
    assert all_threads_stopped(process.pid)  # gone: nothing of it runs


def test_free_ports_lie_below_the_ports_connections_get() -> None:
    # A port in that range can meet a connection to itself, made before its server listens.
    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(port < start for port in ports)
