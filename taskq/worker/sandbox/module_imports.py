"""Importing a worker's ``--modules`` where its jobs run, and saying how it went.

A pool child imports them as it starts, before it says ``ready`` (its first
jobs then find them imported), and the worker's first pool child writes the
report the worker checks (``taskq.worker.module_check``). In process
isolation no child outlives a job: a child Python of its own imports them
(``python -m taskq.worker.sandbox.module_imports PATH MODULE...``) and
prints the report as its last line. Either way module code runs with the
jobs' environment and import path, never in the worker, which holds the
store's URL and credentials.

The report is one JSON line: for each module, the error that importing it
raised (``""``: none), the module or package not found when that is the
module named or a package it is in (not one it imports), with the package
that held no such module when that package imported, and the
``@taskq.job`` declarations it holds, which the worker publishes
(``taskq.worker.publishing``).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple

import msgspec

# Where ``@taskq.job`` keeps what it declared: loaded by the modules that declare jobs.
_DECLARED = "taskq.broker.client.declared"
# This process's import of the worker's modules: a job that finds one without its
# function is told it runs the module as it was then (``call_targets``).
_at_start: list[StartImports] = []


def import_modules(modules: Sequence[str]) -> list[dict[str, Any]]:
    """Import each of ``modules``; what each raised, or the jobs it declares."""
    reports = [_import(module) for module in modules]
    _at_start.append(StartImports(time.time(), frozenset(sys.modules)))
    return reports


class StartImports(NamedTuple):
    """When a pool child imported the worker's modules as it started, and every module
    loaded by then (theirs, and those they import)."""

    at: float
    modules: frozenset[str]


def start_imports() -> StartImports | None:
    """This process's import of the worker's modules; None when it made none (a job's own
    child, which imports the job's module for the job, or a program running jobs inline)."""
    return _at_start[-1] if _at_start else None


def encode_report(reports: list[dict[str, Any]]) -> bytes:
    """The report as one line of JSON."""
    return msgspec.json.encode(reports) + b"\n"


def _import(module: str) -> dict[str, Any]:
    try:
        imported = importlib.import_module(module)
    except BaseException as exc:  # a module's own SystemExit, too, is its failure to import
        report: dict[str, Any] = {
            "module": module,
            "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
        }
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None and _holds(missing, module):
            report["missing"] = missing
            package = missing.rpartition(".")[0]
            if package in sys.modules:
                # Found and imported: it is the module in it that is not there.
                report["package"] = package
                report["package_modules"] = _modules_in(sys.modules[package])
        return report
    # A module that declared a job imported taskq.job, and with it the client's
    # ``declared``, which describes them. Taken from there: code that runs in a
    # child imports no client of its own (the ``sandbox`` import contract), and
    # a module that did not load it declared nothing.
    declared = sys.modules.get(_DECLARED)
    if declared is None:
        return {"module": module}
    jobs: list[Any] = msgspec.to_builtins(declared.declared_in(imported))
    return {"module": module, "jobs": jobs}


def _modules_in(package: ModuleType) -> list[str] | None:
    """The names of the modules ``package`` holds; None when it is a module, not a package."""
    places = getattr(package, "__path__", None)
    if places is None:
        return None
    import pkgutil  # only a module that is not there needs it

    return sorted(found.name for found in pkgutil.iter_modules(places))


def _holds(name: str, module: str) -> bool:
    """Whether ``name`` is ``module`` or a package it is in (not a module it imports)."""
    return module == name or module.startswith(f"{name}.")


def main(argv: Sequence[str]) -> None:
    import_path, *modules = argv
    sys.path[:] = json.loads(import_path)
    reports = import_modules(modules)
    # Whatever the modules printed came before: the report is the last line.
    sys.stdout.buffer.write(b"\n" + encode_report(reports))
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
