"""Submitting by name as the declared job would be submitted: its options, its signature.

A worker publishes the ``@taskq.job`` declarations of its modules
(:func:`taskq.broker.client.declared.declared_in`, run where the modules are imported). A submit of
``"pkg.mod:f"`` then reads the version the store resolves
(:func:`taskq.broker.ops.functions.function_resolve`): its declared options
are the defaults, the options given win, and the arguments are bound to its
published parameters at once, so a bad call is refused with nothing written.
A name no worker has declared is refused with the names close to it, unless
the submit opts out (``unchecked=True``), or the client looks names up in
its own process too (``import_names``, :mod:`taskq.broker.client.importable`)
and finds the function there.

Every submit by name comes here: one job (:meth:`DeclarationCache.spec`), or
many at once (:meth:`DeclarationCache.spec_many`: a batch, a workflow's steps, a
seed file's calls), where the first call refused is named and nothing is
written; a schedule's job is resolved when the schedule is added.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskq import errors
from taskq.broker import job_validation, worker_policy
from taskq.broker.client import job_options, specs
from taskq.broker.client.call_check import check_arguments
from taskq.broker.client.importable import importable_declaration, importable_names
from taskq.broker.ops.functions import (
    Declaration,
    DeclaredFunction,
    function_names,
    function_resolve,
)
from taskq.broker.ops.plan import Op
from taskq.broker.records import JobSpec, JobState, PayloadKind, QueueStats

CACHE_SECONDS = 2.0
"""How long a client reuses a resolved declaration before reading it again.

A declaration changes only when a worker starts with other code; a submit
this much after such a start gets the old defaults, as it would had it been
made this much earlier. Misses are never kept: a name declared by a worker
that has just started is found at once.
"""


def check_listed_arguments(
    function: DeclaredFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    """:func:`check_arguments` against a job as :meth:`~taskq.Client.functions` lists it."""
    declaration = Declaration(
        name=function.name, parameters=function.parameters, options=function.options
    )
    check_arguments(declaration, args, kwargs)


def declared_spec(
    declaration: Declaration,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> JobSpec:
    """The job of a by-name submit: the declared options, then ``options`` over them."""
    check_arguments(declaration, args, kwargs or {})
    merged = job_options.over_declared(declaration.options, options)
    return specs.call_spec(declaration.name, args, dict(kwargs or {}), **merged)


@dataclass(frozen=True)
class NamedCall:
    """One call of a job by its name, as a submit gives it, not yet resolved.

    ``options`` as ``call_spec`` takes them (the call's keyword arguments in
    ``kwargs``): only those given, which win over the declared ones. ``where``
    names the call among others when it is refused (:func:`batch_entry`).
    """

    target: str
    args: Sequence[Any] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    where: str = ""


def batch_entry(index: int) -> str:
    """How a refusal names the job at ``index`` (from 0) of a batch or a list of jobs.

    Counted from 1, as a reader counts, with the position a list index (or a
    workflow's ``parents``) uses beside it: a bare ``job 1`` reads as a job id.
    """
    return f"entry {index + 1} of the batch (position {index})"


def named(exc: errors.InvalidJob, where: str) -> errors.InvalidJob:
    """``exc`` with ``where`` (which call of several) before its message; as it is without one."""
    if not where:
        return exc
    message = f"{where}: {exc}"
    if isinstance(exc, errors.UnknownFunction):
        return errors.UnknownFunction(message, field=exc.field, suggestions=exc.suggestions)
    return errors.InvalidJob(message, field=exc.field)


# What a worker declares, said in every refusal of an unknown name: a package's
# submodules that its __init__ does not import are run but never declared.
_PUBLISHED = (
    "a worker publishes the @taskq.job functions of its --modules, and of the submodules "
    "their __init__ imports, when it starts"
)
_OPT_OUT = (
    f"{_PUBLISHED}; to queue it for workers yet to start, submit it unchecked: "
    'unchecked=True, --unchecked, or "unchecked": true over HTTP'
)
SPAWN_OPT_OUT = f"{_PUBLISHED}; to spawn it for workers yet to start, give its step unchecked=True"
_OPT_OUT_HERE = (
    f"nor does this process import a function by that name; {_PUBLISHED}; to queue it for "
    "workers yet to start, submit it unchecked: unchecked=True"
)


def unknown_name(
    name: str, known: Sequence[str], opt_out: str = _OPT_OUT
) -> errors.UnknownFunction:
    """The refusal of a name no worker has declared, with the closest declared names.

    ``opt_out``: how the caller submits it anyway (by default, every client's way).
    """
    import difflib  # Imported here, not with the module: only a refusal needs it

    if worker_policy.of_the_standard_library(name.partition(":")[0]):
        # Not "submit it unchecked": no worker should run it.
        return errors.UnknownFunction(
            f"no worker has declared {name}: {worker_policy.standard_library_advice(name)}",
            field="target",
        )

    # Names share their module's prefix, which alone makes them 60% alike: ask for more.
    # A name both declared and importable here is one suggestion, not two.
    close = difflib.get_close_matches(name, list(dict.fromkeys(known)), n=3, cutoff=0.8)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return errors.UnknownFunction(
        f"no worker has declared {name}{hint} ({opt_out})",
        field="target",
        suggestions=tuple(close),
    )


def dotted_name_refused(
    name: str, known: Sequence[str], refused: errors.InvalidJob
) -> errors.InvalidJob:
    """The refusal of a dotted path (``mypkg.tasks``, ``mypkg.tasks.add``), told with the
    declared names (``known``) it may mean; ``refused``, the shape's own, when none is.

    The shape's own guess, the last dot read as the colon, names a job nobody
    declared when the path is a module's: its declared jobs are the better hint.
    """
    in_module = [each for each in known if each.startswith(f"{name}:")]
    meant = job_validation.dotted_meaning(name)
    if in_module:
        shown = ", ".join(in_module[:_MODULE_JOBS_SHOWN])
        more = len(in_module) - _MODULE_JOBS_SHOWN
        hint = f"{name} is a module; its declared jobs: {shown}" + (
            f" and {more} more (taskq functions)" if more > 0 else ""
        )
    elif meant in known:
        hint = f"did you mean {meant!r}?"
    else:
        return refused
    return errors.InvalidJob(
        f"target must look like 'package.module:function', got {name!r}; {hint}",
        field="target",
    )


_MODULE_JOBS_SHOWN = 5


class DeclarationCache:
    """The declarations a client resolved lately, each kept :data:`CACHE_SECONDS`.

    ``import_names``: a name no worker has declared is looked up next in the
    client's own process (:mod:`taskq.broker.client.importable`); never for a
    resolver that must not import what a name says (a server, a worker, the
    command line).
    """

    def __init__(
        self, seconds: float = CACHE_SECONDS, *, import_names: bool = False, opt_out: str = _OPT_OUT
    ) -> None:
        """``opt_out``: how the refusal of an unknown name says to submit it anyway."""
        self.seconds = seconds
        self._import_names = import_names
        self._opt_out = opt_out
        self._found: dict[str, tuple[float, Declaration]] = {}

    def resolve(self, name: str) -> Op[Declaration]:
        """The declaration a submit of ``name`` uses: the version the store resolves, else the
        function this process imports by that name (``import_names``); else
        :class:`taskq.errors.UnknownFunction`."""
        try:
            job_validation.check_target(name)
        except errors.InvalidJob as exc:
            if job_validation.dotted_meaning(name) is None:
                raise
            known = yield from function_names()
            raise dotted_name_refused(name, known, exc) from None
        now = time.monotonic()
        cached = self._found.get(name)
        if cached is not None and cached[0] > now:
            return cached[1]
        version = yield from function_resolve(name)
        declaration = version.declaration if version is not None else None
        if declaration is None and self._import_names:
            declaration = importable_declaration(name)
        if declaration is None:
            known = yield from function_names()
            if not self._import_names:
                raise unknown_name(name, known, self._opt_out)
            raise unknown_name(name, [*known, *importable_names(name)], _OPT_OUT_HERE)
        self._found[name] = (now + self.seconds, declaration)
        return declaration

    def spec(self, target: str, args: Sequence[Any], options: Mapping[str, Any]) -> Op[JobSpec]:
        """The job a submit of ``target`` by name makes (see :func:`declared_spec`).

        ``options`` as ``call_spec`` takes them, the call's keyword arguments in ``kwargs``.
        """
        [spec] = yield from self.spec_many([NamedCall(target, args, options)])
        return spec

    def job_of(self, job: JobSpec | NamedCall, unchecked: bool, submitter: str) -> Op[JobSpec]:
        """The job a schedule keeps: a call by name resolved now (:meth:`spec`), a job
        already built as it is (its call checked: :meth:`check_spec`); unless ``unchecked``."""
        if isinstance(job, JobSpec):
            if not unchecked:
                yield from self.check_spec(job)
            return job
        options = {"submitter": submitter, **job.options}
        if unchecked:
            return specs.spec_of(job.target, job.args, options)
        return (yield from self.spec(job.target, job.args, options))

    def check_spec(self, spec: JobSpec) -> Op[None]:
        """Refuse a job already built whose call a submit by name would refuse: a target no
        worker has declared, or arguments its parameters do not take. Its options stay."""
        if spec.kind is not PayloadKind.CALL or not isinstance(spec.payload, dict):
            return
        payload = spec.payload
        declaration = yield from self.resolve(payload.get("target", ""))
        check_arguments(declaration, payload.get("args") or (), payload.get("kwargs") or {})

    def spec_many(self, calls: Sequence[NamedCall]) -> Op[list[JobSpec]]:
        """The jobs of many submits by name, each as :meth:`spec` makes it, in order.

        All or none: the first call refused raises, named by its ``where``.
        Each name is read once however many calls it has.
        """
        declared: dict[str, Declaration] = {}
        built = []
        for call in calls:
            try:
                specs.check_option_names(call.options)
                if call.target not in declared:
                    declared[call.target] = yield from self.resolve(call.target)
                given = dict(call.options)
                kwargs = given.pop("kwargs", None)
                built.append(declared_spec(declared[call.target], call.args, kwargs, given))
            except errors.InvalidJob as exc:
                raise named(exc, call.where) from None
        return built


def queue_unserved(stats: QueueStats, served: Collection[str]) -> bool:
    """Whether ``stats``'s queue holds queued jobs that none of the live workers would take
    (``served``: the queues they take, :meth:`~taskq.Client.served_queues`)."""
    return stats.counts.get(JobState.QUEUED, 0) > 0 and stats.queue not in served
