"""The real ``taskq-worker`` as a subprocess, for the acceptance tier.

A :class:`WorkerFleet` starts workers through :mod:`taskq.dev.workers` with
``--store URL --config FILE --log-format json``, the config holding the
test timings below, and stops every process it started by pid when it
closes, even after a failure.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from taskq.dev import workers
from taskq.dev.processes import all_threads_stopped, process_gone, wait_until
from taskq.dev.workers import WorkerProcess
from tests.support.jobs import WORKER_TAG_ENV

__all__ = [
    "REPO",
    "TEST_MAX_LIMITS",
    "TEST_WORKER_SETTINGS",
    "WorkerFleet",
    "WorkerProcess",
    "all_threads_stopped",
    "process_gone",
    "wait_until",
    "worker_environment",
    "write_config",
]

REPO = Path(__file__).resolve().parents[2]

# Short timings so that leases lapse and drains end within seconds.
TEST_WORKER_SETTINGS: dict[str, object] = {
    "concurrency": 1,
    "modules": ["tests.support"],
    # Jobs tell which worker ran them through this variable.
    "env_passthrough": [WORKER_TAG_ENV],
    "lease_seconds": 2,
    "heartbeat_seconds": 0.5,
    "lease_margin_seconds": 0.5,
    "grace_seconds": 3,
    "idle_poll_seconds": 0.1,
}
TEST_MAX_LIMITS: dict[str, object] = {
    "memory_bytes": "512MiB",
    "cpu_seconds": 5,
    "wall_seconds": 10,
    "output_bytes": "1MiB",
    "result_bytes": "1MiB",
}


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def write_config(
    path: Path,
    worker: Mapping[str, object] | None = None,
    max_limits: Mapping[str, object] | None = None,
) -> Path:
    """A config file with the test timings, ``worker`` and ``max_limits`` overriding them."""
    settings = {**TEST_WORKER_SETTINGS, **(worker or {})}
    limits = {**TEST_MAX_LIMITS, **(max_limits or {})}
    lines = ["[worker]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in settings.items()]
    lines += ["", "[worker.max_limits]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in limits.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def worker_environment(tag: str) -> dict[str, str]:
    """This environment, minus taskq's own variables, with the repo importable by jobs."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO), os.environ.get("PYTHONPATH", "")) if part
    )
    env[WORKER_TAG_ENV] = tag
    return env


def run_worker_to_its_end(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``taskq-worker --store STORE_URL ARGS`` run until it stops by itself (a worker that
    cannot start), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "taskq.worker.launch", "--store", store_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=worker_environment("bad"),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


class WorkerFleet:
    """Starts workers for one test and stops all of them, by pid, when closed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Every variable comes from worker_environment(tag), none from this process.
        self.fleet = workers.WorkerFleet(root, env={})

    @property
    def workers(self) -> list[WorkerProcess]:
        return self.fleet.workers

    def start(
        self,
        store_url: str,
        *,
        tag: str = "w",
        config: Path | None = None,
        worker: Mapping[str, object] | None = None,
        max_limits: Mapping[str, object] | None = None,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        wait_started: bool = True,
    ) -> WorkerProcess:
        """Start ``taskq-worker`` named ``tag`` (jobs see it in ``WORKER_TAG_ENV``).

        Without ``config`` a file with the test timings is written, with
        ``worker`` and ``max_limits`` overriding them.
        """
        if config is None:
            directory = self.root / tag
            directory.mkdir(parents=True, exist_ok=True)
            config = write_config(directory / "config.toml", worker, max_limits)
        return self.fleet.start(
            store_url,
            tag=tag,
            args=("--config", str(config), "--log-format", "json", *extra_args),
            env={**worker_environment(tag), **(extra_env or {})},
            wait_started=wait_started,
        )

    def describe(self) -> str:
        return self.fleet.describe()

    def close(self, *, at_once: bool = False) -> None:
        """Stop every worker: each gets SIGTERM at once, then its bounded wait, then SIGKILL.

        ``at_once``: a second SIGTERM too, so that running jobs go back without their grace.
        """
        self.fleet.close(at_once=at_once)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def write_lock_is_free(database: Path) -> bool:
    """Whether a writer can begin on the embedded store at once."""
    connection = sqlite3.connect(database, timeout=0.5, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


def freeze_between_writes(worker: WorkerProcess, database: Path) -> None:
    """SIGSTOP ``worker`` at a moment it holds no write lock on the embedded store.

    A process frozen inside its commit holds every other writer of the file
    up until it runs again (docs/stores.md). A test about a frozen worker's
    lease means a worker frozen between its writes, so a freeze that lands
    inside one is undone and tried again.
    """
    for _ in range(100):
        worker.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: all_threads_stopped(worker.pid), timeout=5, interval=0.005)
        if write_lock_is_free(database):
            return
        worker.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"worker {worker.pid} held the store's write lock at each of 100 tries")
