"""``taskq-worker`` processes started in the background by a command, stopped by pid.

Each worker leads a session of its own, so a Ctrl-C at the terminal reaches
the command only, which then stops its workers in order: SIGTERM drains a
worker (a second one stops its jobs at once and hands them back), and one
still running after a bounded wait is killed with its process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Self

from taskq.broker.store_url import STORE_ENV

STOP_TIMEOUT_SECONDS = 15.0
_SECOND_SIGNAL_DELAY = 0.2


def worker_command() -> list[str]:
    """The ``taskq-worker`` script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("taskq-worker")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "taskq.worker.main"]


class WorkerProcesses:
    """Background workers on one store and queue; a context manager that stops them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        store_url: str,
        *,
        count: int,
        queue: str,
        concurrency: int,
        name: str,
        extra_args: Sequence[str] = (),
    ) -> None:
        """Start ``count`` workers named ``name-1``, ``name-2``... taking jobs from ``queue``."""
        env = {key: value for key, value in os.environ.items() if key != STORE_ENV}
        for index in range(1, count + 1):
            argv = [
                *worker_command(),
                *("--store", store_url),
                *("--queues", queue),
                *("--concurrency", str(concurrency)),
                *("--name", f"{name}-{index}"),
                *extra_args,
            ]
            with self.log_path(index).open("ab") as log:
                self.processes.append(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )

    def log_path(self, index: int) -> Path:
        """Where worker ``index`` (from 1) writes its log."""
        return self.log_dir / f"worker-{index}.log"

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def running(self) -> int:
        """How many of the workers are still running."""
        return sum(process.poll() is None for process in self.processes)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of every worker's log, for an error message."""
        parts = []
        for index in range(1, len(self.processes) + 1):
            try:
                text = self.log_path(index).read_text(errors="replace")
            except OSError:
                continue
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"{self.log_path(index)}:\n{tail}")
        return "\n".join(parts)

    def stop(self, *, at_once: bool = False, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM every worker (twice when ``at_once``), wait, then SIGKILL the stragglers."""
        live = [process for process in self.processes if process.poll() is None]
        for process in live:
            with suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
        if at_once and live:
            # A second signal makes a draining worker stop its jobs at once.
            time.sleep(_SECOND_SIGNAL_DELAY)
            for process in live:
                if process.poll() is None:
                    with suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in live:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                # Still unreaped, so its pid (and group id) cannot have been reused.
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(at_once=exc is not None)
