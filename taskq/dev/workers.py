"""Real ``taskq-worker`` processes in the background, started here and stopped by pid.

Each worker leads a session of its own, so a Ctrl-C at the terminal reaches
the command that started it only, which then stops its workers in order:
SIGTERM drains a worker (a second one stops its jobs at once and hands them
back), and one still running after a bounded wait is killed with its
process group and every sandbox child it was seen to have. Sandbox children
lead sessions of their own, so killing the worker's group alone would miss
them; a worker's descendants are noted before every signal and at shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from taskq.dev.processes import descendants, start_time

STOP_TIMEOUT_SECONDS = 15.0
LOG_TAIL_LINES = 40
# A second SIGTERM this soon after the first makes a draining worker stop its jobs at once.
_SECOND_SIGNAL_DELAY = 0.2

Event = dict[str, Any]


def worker_command() -> list[str]:
    """The ``taskq-worker`` script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("taskq-worker")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "taskq.worker.launch"]


class WorkerProcess:
    """One running ``taskq-worker``, its log (JSON events when so configured), its children."""

    def __init__(
        self, tag: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path
    ) -> None:
        self.tag = tag
        self.argv = list(argv)
        self.log_path = log_path
        self._seen: dict[int, int] = {}  # descendant pid -> its start time
        self._terminated = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        self.pid = self.process.pid

    # -- looking at it

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def worker_id(self) -> str:
        """The id the worker registered under (from its ``worker_started`` event)."""
        return str(self.wait_for_event("worker_started")["worker"])

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def events(self, name: str | None = None, **match: object) -> list[Event]:
        """The JSON events logged so far, optionally those named ``name`` with ``match``."""
        found = []
        for line in self.log_text().splitlines():
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if name is not None and event.get("event") != name:
                continue
            if all(event.get(key) == value for key, value in match.items()):
                found.append(event)
        return found

    def wait_for_event(self, name: str, timeout: float = 20.0, **match: object) -> Event:
        """The first event ``name`` with ``match``, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.events(name, **match)
            if found:
                return found[0]
            if not self.running and not self.events(name, **match):
                raise AssertionError(
                    f"worker exited ({self.process.returncode}) before logging {name} {match}\n"
                    + self.describe()
                )
            if time.monotonic() >= deadline:
                raise AssertionError(f"no {name} {match} within {timeout:g} s\n" + self.describe())
            time.sleep(0.05)

    def describe(self, lines: int = LOG_TAIL_LINES) -> str:
        """The worker's pid, whether it runs, and the end of its log: for error messages."""
        state = "running" if self.running else f"exited {self.process.returncode}"
        tail = self.log_text().splitlines()[-lines:]
        return f"--- taskq-worker pid {self.pid} ({state}), {self.log_path}:\n" + "\n".join(tail)

    # -- signals

    def note_descendants(self) -> None:
        """Remember the worker's sandbox children (and theirs), to kill them at shutdown."""
        if not self.running:
            return
        for pid in descendants(self.pid):
            started = start_time(pid)
            if started is not None:
                self._seen.setdefault(pid, started)

    def send_signal(self, sig: int) -> None:
        self.note_descendants()
        if self.running:
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        """The exit code, waiting up to ``timeout`` seconds (AssertionError if still running)."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"taskq-worker still running after {timeout:g} s\n" + self.describe()
            ) from None

    def terminate(self) -> None:
        """SIGTERM, once (a second SIGTERM would make the worker stop its jobs at once)."""
        if not self._terminated:
            self._terminated = True
            self.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL the group and every child seen."""
        try:
            if self.running:
                self.terminate()
                with suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the worker's group and every descendant seen, sparing reused pids."""
        self.note_descendants()
        if self.running:
            # Still unreaped, so its pid (and group id) cannot have been reused.
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        for pid, started in self._seen.items():
            if start_time(pid) != started:
                continue  # gone (or the pid now names another process)
            # A sandbox child leads a group that holds the job's own processes.
            with suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)


def environment_without(prefix: str) -> dict[str, str]:
    """This process's environment minus the variables whose names start with ``prefix``."""
    return {key: value for key, value in os.environ.items() if not key.startswith(prefix)}


class WorkerFleet:
    """Workers started under one directory (``ROOT/TAG/worker.log``), all stopped on close.

    ``env`` is every worker's environment (default: this one); a worker's
    own ``env`` adds to it.
    """

    def __init__(self, root: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.env = dict(os.environ if env is None else env)
        self.workers: list[WorkerProcess] = []

    def start(
        self,
        store_url: str,
        *,
        tag: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        wait_started: bool = False,
    ) -> WorkerProcess:
        """Start ``taskq-worker --store URL --name TAG ARGS``; ``wait_started`` needs JSON logs."""
        argv = [*worker_command(), *("--store", store_url), *("--name", tag), *args]
        worker = self.launch(tag, argv, env=env)
        if wait_started:
            worker.wait_for_event("worker_started")
        return worker

    def launch(
        self, tag: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> WorkerProcess:
        """Run ``argv`` (a worker, however started) as the fleet's worker ``tag``."""
        directory = self.root / tag
        directory.mkdir(parents=True, exist_ok=True)
        worker = WorkerProcess(
            tag, argv, directory / "worker.log", {**self.env, **(env or {})}, directory
        )
        self.workers.append(worker)
        return worker

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self.workers]

    def running(self) -> int:
        """How many of the workers are still running."""
        return sum(worker.running for worker in self.workers)

    def describe(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(worker.describe(lines) for worker in self.workers)

    def close(self, *, at_once: bool = False, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Stop every worker: SIGTERM to all (twice when ``at_once``), then wait, then SIGKILL.

        Each worker is given up to ``timeout`` seconds in turn.
        """
        for worker in self.workers:
            with suppress(ProcessLookupError):
                worker.terminate()
        if at_once and self.running():
            time.sleep(_SECOND_SIGNAL_DELAY)
            for worker in self.workers:
                with suppress(ProcessLookupError):
                    worker.send_signal(signal.SIGTERM)
        errors: list[BaseException] = []
        for worker in reversed(self.workers):
            try:
                worker.stop(timeout)
            except BaseException as exc:  # carry on: every worker must be stopped
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(at_once=exc is not None)
