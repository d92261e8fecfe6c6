"""Importing a worker's ``--modules`` once at start, so that a typo stops it there, not per job.

The import runs in a child Python with the environment and import path its
jobs get (``python -m taskq.worker.module_check``): module code never runs
in the worker, which holds the store's URL and credentials, and a module
that imports here imports for the jobs too. The child prints one JSON line:
for each module, the error that importing it raised, if any, and the
``@taskq.job`` declarations it holds, which the worker publishes
(``taskq.worker.publishing``).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

import msgspec

from taskq import errors
from taskq.broker.ops.functions import Declaration

IMPORT_TIMEOUT_SECONDS = 120.0


class ModuleReport(msgspec.Struct, frozen=True):
    """What importing one module gave: ``error`` names what it raised (``""``: nothing),
    ``jobs`` the declared jobs it holds."""

    module: str
    error: str = ""
    jobs: list[Declaration] = []


class ModuleCheck:
    """The import of a worker's ``--modules`` under way in a child; ``wait`` gives its verdict.

    Started before the worker imports its own heavy parts (its loop, the
    store's drivers), so that the two overlap: a worker's start-up counts
    towards the first job's wait.
    """

    def __init__(
        self,
        modules: Sequence[str],
        *,
        import_path: Sequence[str],
        env: Mapping[str, str],
        timeout: float = IMPORT_TIMEOUT_SECONDS,
    ) -> None:
        self._modules = list(modules)
        self._timeout = timeout
        self._started = time.monotonic()
        self._child: subprocess.Popen[bytes] | None = None
        if modules:
            paths = json.dumps(list(import_path))
            self._child = subprocess.Popen(
                [sys.executable, "-m", "taskq.worker.module_check", paths, *modules],
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )

    def wait(self) -> list[Declaration]:
        """Wait for the import; the modules' declared jobs, or ConfigError naming what fails."""
        child = self._child
        if child is None:
            return []
        named = ",".join(self._modules)
        left = self._timeout - (time.monotonic() - self._started)
        try:
            stdout, stderr = child.communicate(timeout=max(left, 0.0))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise errors.ConfigError(
                f"importing --modules {named} took more than {self._timeout:g} s"
            ) from None
        try:
            reports = msgspec.json.decode(stdout.splitlines()[-1], type=list[ModuleReport])
        except (IndexError, msgspec.DecodeError):
            said = stderr.decode(errors="replace").strip().splitlines()
            raise errors.ConfigError(
                f"importing --modules {named} failed"
                + (f": {said[-1]}" if said else f" (exit status {child.returncode})")
            ) from None
        failed = [f"{report.module}: {report.error}" for report in reports if report.error]
        if failed:
            raise errors.ConfigError("cannot import --modules: " + "; ".join(failed))
        return [job for report in reports for job in report.jobs]


def _import(module: str) -> ModuleReport:
    try:
        imported = importlib.import_module(module)
    except BaseException as exc:  # a module's own SystemExit, too, is its failure to import
        return ModuleReport(module, error=f"{type(exc).__name__}: {exc}".splitlines()[0])
    # A module that declared a job imported taskq.job; one that did not has none to describe.
    if "taskq.broker.client.declared" not in sys.modules:
        return ModuleReport(module)
    from taskq.broker.client import declared

    return ModuleReport(module, jobs=declared.declared_in(imported))


def main(argv: Sequence[str]) -> None:
    import_path, *modules = argv
    sys.path[:] = json.loads(import_path)
    reports = [_import(module) for module in modules]
    # Whatever the modules printed came before: the report is the last line.
    sys.stdout.write("\n" + msgspec.json.encode(reports).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
