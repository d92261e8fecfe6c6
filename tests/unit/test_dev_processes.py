"""taskq.dev.processes: telling a process stopped in every thread from one still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from taskq.dev.processes import all_threads_stopped, wait_until

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
