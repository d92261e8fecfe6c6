"""A job named by a function the submitting process imports: taken as the function itself.

``client.submit("pkg.mod:f", ...)`` before any worker has declared
``pkg.mod:f`` is the same submit as ``client.submit(pkg.mod.f, ...)`` when
this process imports ``pkg.mod`` and finds ``f`` there under that name: a
job declared with ``@taskq.job`` keeps its declared options, and the
arguments are checked against the function's signature. A name that does not
import (a typo) is still refused, and a worker that publishes the name later
wins, since the store is asked first
(:class:`taskq.broker.client.declarations.DeclarationCache`).

Only a client inside the user's own program looks here. ``taskq serve`` and
the command line never import what a name says: a name sent by somebody
else must not run code in the process that reads it.

What a worker publishes of a declared job (:func:`describe`) is built here
too, so that a job reads the same whichever way it is found.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any, Protocol, runtime_checkable

from taskq import errors
from taskq.broker.client.call_check import parameters_of
from taskq.broker.client.specs import call_spec, function_target
from taskq.broker.ops.functions import Declaration


@runtime_checkable
class HasDeclaredOptions(Protocol):
    """A declared job (``taskq.job``'s ``DeclaredJob``): its function and its options."""

    function: Any
    declared_options: dict[str, Any]


def importable_declaration(name: str) -> Declaration | None:
    """What a submit of ``name`` ("pkg.mod:f") takes from the function this process imports
    by that name; None if there is no such module here or it holds no such function.

    A module that is here but fails to import is
    :class:`taskq.errors.InvalidJob` quoting its import's error: the name is
    right, and that error is what the caller needs to see.
    """
    module_name, _, qualname = name.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            return None  # no such module here: a name for the workers to declare
        raise _does_not_import(module_name, exc) from exc
    except Exception as exc:  # the module's own code failed: its error, told
        raise _does_not_import(module_name, exc) from exc
    for attribute in qualname.split("."):
        found = getattr(found, attribute, None)
    function = found.function if isinstance(found, HasDeclaredOptions) else found
    if not inspect.isfunction(function):
        return None
    try:
        target = function_target(function)
    except errors.InvalidJob:
        return None
    # Imported under another name (``from elsewhere import f``), a worker would
    # find it where it is defined, not by this name.
    if target != name:
        return None
    if isinstance(found, HasDeclaredOptions):
        return describe(found)
    return Declaration(name=name, parameters=parameters_of(function), doc=_doc_line(function))


def importable_names(name: str) -> list[str]:
    """The jobs the module of ``name`` holds, as names (``pkg.mod:f``), if this process has
    imported it: where a misspelt name finds the ones close to it."""
    module_name = name.partition(":")[0]
    module = sys.modules.get(module_name)
    if module is None:
        return []
    found = []
    for attribute, value in list(vars(module).items()):
        function = value.function if isinstance(value, HasDeclaredOptions) else value
        if inspect.isfunction(function) and getattr(function, "__module__", None) == module_name:
            found.append(f"{module_name}:{attribute}")
    return found


def _does_not_import(module_name: str, exc: Exception) -> errors.InvalidJob:
    return errors.InvalidJob(
        f"{module_name} is here but does not import: {type(exc).__name__}: {exc}",
        field="target",
    )


def describe(job: HasDeclaredOptions) -> Declaration:
    """What a worker publishes of a declared job: its name, parameters, options and doc."""
    options = dict(job.declared_options)
    # Options as the job's record keeps them: a RetryPolicy as its dict, labels as a list.
    spec = call_spec("taskq:_", **options)
    published = {name: getattr(spec, name) for name in options}
    if "labels" in published:
        published["labels"] = sorted(published["labels"])
    return Declaration(
        name=function_target(job.function),
        parameters=parameters_of(job.function),
        options=published,
        doc=_doc_line(job.function),
    )


def _doc_line(function: Any) -> str:
    doc = (inspect.getdoc(function) or "").strip()
    return doc.splitlines()[0] if doc else ""
