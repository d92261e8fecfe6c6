"""A job's target in its child: the function it names, whether it may run here, and
whether its arguments fit (``job_process.run_job`` asks, in that order)."""

from __future__ import annotations

import importlib
import inspect
import linecache
import sys
import time
from collections.abc import Callable

from taskq.broker.worker_policy import module_allowed
from taskq.worker.sandbox.payloads import CallPayload, PythonExecPayload

_EXEC_FILENAME = "<python_exec>"


def misfit(
    function: Callable[..., object], payload: CallPayload | PythonExecPayload
) -> TypeError | None:
    """Why the job's arguments do not fit ``function``'s signature; None when they do."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # no signature to read (some builtins): the call's own error stands
    try:
        signature.bind(*payload.args, **payload.kwargs)
    except TypeError as exc:
        name = getattr(function, "__qualname__", repr(function))
        return TypeError(f"the job's arguments do not fit {name}{signature}: {exc}")
    return None


def foreign_function(target: str, function: object, modules: list[str]) -> str:
    """Why ``function`` may not run as ``target`` (``""``: it may).

    The worker checked the target's module; but a module of the worker's may
    have imported ``os.system`` as ``mymod.system``: what runs must be
    defined in one of the worker's modules too.
    """
    defined_in = getattr(function, "__module__", None)
    if isinstance(defined_in, str) and module_allowed(defined_in, modules):
        return ""
    return (
        f"{target} is defined in {defined_in or 'no module'}, not among this worker's "
        f"modules ({', '.join(modules) or 'none given'})"
    )


def _imported_before(name: str) -> str:
    """Why a module this process had imported before the job lacks a function: a pool child
    runs its modules as they were when it imported them, until the worker is restarted."""
    from taskq.worker.sandbox import module_imports  # imported already: it made the child

    start = module_imports.start_imports()
    if start is None:
        return ""  # imported by the program that runs the job inline (taskq.testing)
    if name in start.modules:
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start.at))
        when = f"when it started, at {at}"
    else:
        when = "for an earlier job"
    return (
        f": the worker imported {name} {when}, and runs it as it was then; "
        "a worker picks up new or changed functions only when restarted"
    )


def resolve(payload: CallPayload | PythonExecPayload) -> Callable[..., object]:
    """The function ``payload`` names: imported, or defined by its ``python_exec`` code."""
    found: object
    if isinstance(payload, CallPayload):
        module_name, _, attribute_path = payload.target.partition(":")
        # A warm pool child has nearly always imported the module already.
        module = sys.modules.get(module_name)
        imported_before = module is not None
        found = module = module or importlib.import_module(module_name)
        for attribute in attribute_path.split("."):
            try:
                found = getattr(found, attribute)
            except AttributeError as exc:
                # Imported for this job, the module is as it is now: its own words say it all.
                if found is not module or not imported_before:
                    raise
                raise AttributeError(f"{exc}{_imported_before(module_name)}") from None
        name = payload.target
    else:
        # Registering the source lets tracebacks show the job's lines.
        lines = payload.code.splitlines(keepends=True)
        linecache.cache[_EXEC_FILENAME] = (len(payload.code), None, lines, _EXEC_FILENAME)
        namespace: dict[str, object] = {"__name__": "__taskq_python_exec__"}
        exec(compile(payload.code, _EXEC_FILENAME, "exec"), namespace)
        name = payload.function
        if name not in namespace:
            raise NameError(f"the python_exec code defines no {name!r}")
        found = namespace[name]
    if not callable(found):
        raise TypeError(f"{name} is not callable")
    return found
