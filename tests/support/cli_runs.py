"""The real ``taskq`` command (or ``taskq-worker``, ``taskq-tui``) run as a user runs it.

For the acceptance tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from tests.support.worker_process import REPO

COMMAND_TIMEOUT = 90.0
"""Long enough for the default failover budget (about 12 s) several times over."""

# Each command's module, run as ``python -m``: the console scripts' own code.
_MODULES = {
    "taskq": "taskq.cli",
    "taskq-worker": "taskq.worker.launch",
    "taskq-tui": "taskq.app.main",
}


@dataclass(frozen=True)
class Ran:
    """What one ``taskq`` run printed and how it exited."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def taskq(
    *args: str,
    store: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> Ran:
    """Run ``python -m taskq.cli [--store STORE] ARGS`` with no TASKQ_* from this environment;
    one that overruns ``timeout`` is killed, and raises ``subprocess.TimeoutExpired``."""
    return command("taskq", *args, store=store, env=env, timeout=timeout)


def command(
    program: str,
    *args: str,
    store: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> Ran:
    """Run ``program`` (``taskq``, ``taskq-worker`` or ``taskq-tui``) as :func:`taskq` does."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    module = _MODULES[program]
    argv = [sys.executable, "-m", module, *(("--store", store) if store else ()), *args]
    # subprocess.run kills the command by pid if it overruns its timeout.
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **(env or {})},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def ok(*args: str, store: str) -> Ran:
    """Run ``taskq``; fail the test with its output unless it exits 0."""
    ran = taskq(*args, store=store)
    assert ran.code == 0, f"taskq {' '.join(args)} exited {ran.code}\n{ran.out}\n{ran.err}"
    return ran


def one_error_line(ran: Ran, code: int, *fragments: str, program: str = "taskq") -> str:
    """The single ``PROGRAM: error:`` line of a run that exited ``code``, naming ``fragments``."""
    assert ran.code == code, ran
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1, ran.err
    assert lines[0].startswith(f"{program}: error: "), ran.err
    for fragment in fragments:
        assert fragment in lines[0], ran.err
    return lines[0]
