"""The real ``taskq-worker`` as a subprocess, for the acceptance tier.

A ``WorkerFleet`` starts workers with ``--store URL --config FILE --log-format
json``, each writing stdout and stderr to a log file of its own, and stops
every process it started by pid when it closes, even after a failure:
SIGTERM, a bounded wait, then SIGKILL of the worker's process group and of
every sandbox child it was seen to have. Sandbox children lead sessions of
their own, so killing the worker's group alone would miss them; the fleet
notes a worker's descendants before every signal it sends and at shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.support.jobs import WORKER_TAG_ENV

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
STOP_WAIT_SECONDS = 15.0
LOG_TAIL_LINES = 40

Event = dict[str, Any]


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


def worker_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("taskq-worker")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "taskq.worker.main"]


def worker_environment(tag: str) -> dict[str, str]:
    """This environment, minus taskq's own variables, with the repo importable by jobs."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO), os.environ.get("PYTHONPATH", "")) if part
    )
    env[WORKER_TAG_ENV] = tag
    return env


# -- processes, by pid ------------------------------------------------------------------


def _start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (to tell a pid from a later reuse), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19])


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, however deep."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in {"Z", "X"}


def wait_until(condition: Callable[[], bool], timeout: float, *, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


# -- one worker ---------------------------------------------------------------------------


class WorkerProcess:
    """One running ``taskq-worker``, its JSON event log, and the processes it started."""

    def __init__(
        self, tag: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path
    ) -> None:
        self.tag = tag
        self.argv = list(argv)
        self.log_path = log_path
        self._seen: dict[int, int] = {}  # descendant pid -> its start time
        self._terminated = False
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
        """The worker's pid, whether it runs, and the end of its log: for assertion messages."""
        state = "running" if self.running else f"exited {self.process.returncode}"
        tail = self.log_text().splitlines()[-lines:]
        return f"--- taskq-worker pid {self.pid} ({state}), {self.log_path}:\n" + "\n".join(tail)

    # -- signals

    def note_descendants(self) -> None:
        """Remember the worker's sandbox children (and theirs), to kill them at shutdown."""
        if not self.running:
            return
        for pid in descendants(self.pid):
            started = _start_time(pid)
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

    def stop(self, timeout: float = STOP_WAIT_SECONDS) -> None:
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
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_WAIT_SECONDS)
        for pid, started in self._seen.items():
            if _start_time(pid) != started:
                continue  # gone (or the pid now names another process)
            # A sandbox child leads a group that holds the job's own processes.
            with suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)


# -- every worker of a test ----------------------------------------------------------------


@dataclass
class WorkerFleet:
    """Starts workers for one test and stops all of them, by pid, when closed."""

    root: Path
    workers: list[WorkerProcess] = field(default_factory=list)

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
        directory = self.root / f"worker-{tag}"
        directory.mkdir(parents=True, exist_ok=True)
        if config is None:
            config = write_config(directory / "config.toml", worker, max_limits)
        argv = [
            *worker_command(),
            *("--store", store_url),
            *("--config", str(config)),
            *("--log-format", "json"),
            *("--name", tag),
            *extra_args,
        ]
        process = WorkerProcess(
            tag,
            argv,
            directory / "worker.log",
            {**worker_environment(tag), **(extra_env or {})},
            directory,
        )
        self.workers.append(process)
        if wait_started:
            process.wait_for_event("worker_started")
        return process

    def describe(self) -> str:
        return "\n".join(worker.describe() for worker in self.workers)

    def close(self) -> None:
        """Stop every worker: each gets SIGTERM at once, then its bounded wait, then SIGKILL."""
        for worker in self.workers:
            with suppress(ProcessLookupError):
                worker.terminate()
        errors: list[BaseException] = []
        for worker in reversed(self.workers):
            try:
                worker.stop()
            except BaseException as exc:  # carry on: every worker must be stopped
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
