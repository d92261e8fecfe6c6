"""How a job is described before it is submitted: the job of each kind, its options, its call.

Every client, the flows, the declarations, the command line and the HTTP
API build jobs here; :mod:`taskq.broker.client.client_base` submits them.
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
import socket
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, SupportsIndex, TypeAlias, runtime_checkable

import msgspec

from taskq import errors, job_context
from taskq.broker import job_validation, worker_policy
from taskq.broker.client import celery_habits
from taskq.broker.client.call_check import check_arguments, parameters_of
from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES, checked_row
from taskq.broker.ops.functions import Declaration
from taskq.broker.records import Job, JobBrief, JobSpec, PayloadKind, WorkflowInfo
from taskq.close_names import did_you_mean
from taskq.retry import RetryPolicy, parse_retry


def default_submitter() -> str:
    """``user@host`` of this process: who submitted a job, unless a client says otherwise."""
    import getpass  # Imported here, not with the module: a worker never asks (it loads termios)

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def call_spec(
    target: str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    queue: str = "default",
    priority: int = 0,
    delay: float = 0.0,
    run_at: float | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    limits: dict[str, Any] | None = None,
    labels: Collection[str] = (),
    idempotency_key: str | None = None,
    submitter: str = "",
    retry: RetryPolicy | dict[str, Any] | None = None,
    after: Sequence[JobRef] = (),
    run_anyway: bool = False,
) -> JobSpec:
    """A job that calls ``target`` ("pkg.module:function") with JSON arguments.

    The target is checked at once; every other value is kept as given, not
    converted, and checked exactly when the job is enqueued (see
    :mod:`taskq.broker.job_validation`): ``labels="gpu"`` is refused there,
    not taken as the labels g, p and u.

    ``max_attempts``, ``timeout`` and ``retry`` (a :class:`taskq.RetryPolicy`)
    left as None, and each limit left out, take the queue's defaults (``taskq
    queue set``), else 3 attempts, no timeout and the default policy.

    ``after`` lists the jobs (handles, records or ids: :data:`JobRef`) this
    one runs after: it waits until each has ended, and is cancelled when one
    ends without succeeding, unless ``run_anyway``. A workflow's handle is
    refused: its jobs are ``handle.job_ids``.
    """
    job_validation.check_target(target)
    return JobSpec(
        kind=PayloadKind.CALL,
        payload={
            "target": target,
            # A copy, so that the caller changing its list later changes no job;
            # *args arrive as a tuple, and JSON stores any array as a list.
            "args": list(args) if isinstance(args, list | tuple) else args,
            "kwargs": {} if kwargs is None else kwargs,
        },
        queue=queue,
        priority=priority,
        delay=delay,
        run_at=run_at,
        max_attempts=max_attempts,
        timeout=timeout,
        limits={} if limits is None else limits,
        labels=labels,
        idempotency_key=idempotency_key,
        submitter=submitter,
        retry=None if retry is None else parse_retry(retry).to_dict(),
        after=job_ids(after),
        run_anyway=run_anyway,
    )


class OfAStore(Protocol):
    """A client, as a handle knows it: by the store its job ids belong to."""

    @property
    def store_name(self) -> str: ...


class SubmittedJob:
    """A job's handle, of either client (``JobHandle``, ``AsyncJobHandle``): a job already
    submitted, by its id, and the client it was submitted through.

    Declared here, below the clients that subclass it, for :func:`job_id` to tell a job's
    handle from a workflow's, whose ``id`` is a workflow's.
    """

    id: int
    client: OfAStore

    if not TYPE_CHECKING:  # a type checker still flags every name a handle lacks

        def __getattr__(self, name: str) -> Any:
            raise celery_habits.missing(self, name, celery_habits.JOB_HANDLE, "handle")

        def __await__(self) -> Any:
            raise celery_habits.not_awaited(self)


JobRef: TypeAlias = "int | SupportsIndex | SubmittedJob | Job | JobBrief"
"""A stored job: its id (an ``int``, or numpy's), its handle or its record (``Job``,
``JobBrief``)."""


class HandleId(int):
    """A job's id as ``after=`` takes it from the job's handle, with the store of the
    handle's client (``store_name``): the same number names another job, or none, in
    another store, so a client refuses it as a parent unless the store is its own
    (:func:`parents_here`). An ``int`` to everything else; the client hands on plain ids.
    """

    store: str

    def __new__(cls, job_id: int, store: str) -> HandleId:
        made = super().__new__(cls, job_id)
        made.store = store
        return made

    def __reduce__(self) -> tuple[type[HandleId], tuple[int, str]]:
        # A job built with it may be copied or pickled; int's own way would drop the store.
        return HandleId, (int(self), self.store)


# Named, not any value with an ``id``: a workflow's handle and record, and an attempt's
# (``Execution``), have one too, of something else.
_JOBS = (SubmittedJob, Job, JobBrief)
# What a request about a job is for a workflow, for the refusal of a workflow given to it.
_FOR_A_WORKFLOW = {"wait": "wait_workflow", "cancel": "cancel_workflow", "retry": "retry_workflow"}


def job_ids(jobs: Sequence[JobRef], request: str | None = None) -> tuple[int, ...]:
    """The ids of ``jobs``, each as :func:`job_id` takes it; :class:`taskq.errors.InvalidJob`
    for anything else, or for a value that is not a list of them."""
    # A tuple or a list, the usual, skips the abstract Sequence check and its cost.
    if not isinstance(jobs, tuple | list) and (
        isinstance(jobs, str | bytes) or not isinstance(jobs, Sequence)
    ):
        raise errors.InvalidJob(
            f"after takes a list of jobs (handles or ids), not {type(jobs).__name__}",
            field="after",
        )
    return tuple(job_id(job, request) for job in jobs)


def job_id(job: object, request: str | None = None) -> int:
    """The id of ``job`` (a :data:`JobRef`), as ``after=`` (``request`` None) and the client's
    requests about a job (``request``: the method's name, ``"cancel"``) take it.

    Anything else, a workflow's handle included, raises :class:`taskq.errors.InvalidJob`
    saying what is taken (for a workflow, how to name its jobs instead).
    """
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    if isinstance(job, SubmittedJob) and request is None:
        return HandleId(job.id, job.client.store_name)
    if isinstance(job, _JOBS):
        return job.id
    if isinstance(job, SupportsIndex) and not isinstance(job, bool):
        # An integer of another kind (numpy's, read from a table of ids) is an id too.
        return operator.index(job)
    taker = "after" if request is None else f"client.{request}()"
    raise errors.InvalidJob(
        f"{taker} takes a job's id, handle or record, not {_not_a_job(job, request)}",
        field="after" if request is None else "job_id",
    )


def parents_here(spec: JobSpec, store: str | None) -> JobSpec:
    """``spec`` with its parents as plain ids, a parent taken from a handle (:class:`HandleId`)
    refused unless it is a job of ``store``, the submitting client's (None: of any store, for
    a spawn, whose store only its worker knows); nothing is asked of a store.
    """
    after = spec.after if isinstance(spec, JobSpec) else ()
    if not isinstance(after, tuple | list) or not any(isinstance(p, HandleId) for p in after):
        return spec  # nothing taken from a handle; any other fault is the enqueue's to refuse
    return msgspec.structs.replace(spec, after=ids_here(after, store))


def ids_here(parents: Sequence[int], store: str | None) -> tuple[int, ...]:
    """``parents`` as plain ids: :class:`taskq.errors.InvalidJob` for one taken from the
    handle of a job of another store than ``store`` (see :func:`parents_here`)."""
    for parent in parents:
        if isinstance(parent, HandleId) and store is not None and parent.store != store:
            raise errors.InvalidJob(
                f"after: job {parent} is a job of {parent.store} (its handle's store), but this "
                f"client submits to {store}, where job {parent} is another job or none: a job "
                "waits only on jobs of its own store",
                field="after",
            )
    return tuple(int(parent) if isinstance(parent, HandleId) else parent for parent in parents)


def workflow_id_of(value: object) -> int | None:
    """The id of the workflow ``value`` is the handle or record of; None: it is none."""
    # A workflow's handle (of either client) and the SubmittedWorkflow it holds have
    # their jobs' ids, which no job's handle or record has.
    if isinstance(value, WorkflowInfo) or hasattr(value, "job_ids"):
        found = getattr(value, "id", None)
        return found if isinstance(found, int) else None
    return None


def workflow_id(value: object) -> int:
    """The id of the workflow ``value`` names, as the client's requests about a workflow
    take it: a whole number, or the workflow's handle or record (its ``id``).

    Anything else raises :class:`taskq.errors.InvalidJob` saying so.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, SupportsIndex) and not isinstance(value, bool):
        return operator.index(value)
    given = workflow_id_of(value)
    if given is not None:
        return given
    raise errors.InvalidJob(
        "a request about a workflow takes its id (a whole number) or its handle, "
        f"not {job_context.shown(value)}",
        field="workflow_id",
    )


def _not_a_job(value: object, request: str | None) -> str:
    """``value`` as a refusal of it as a job names it; a workflow with what stands for it."""
    workflow = workflow_id_of(value)
    if workflow is None:
        return job_context.shown(value)
    kind = type(value).__name__
    said = f"workflow {workflow} ({'an' if kind[:1] in 'AEIOU' else 'a'} {kind})"
    if request is not None:
        instead = _FOR_A_WORKFLOW.get(request, "workflow")
        return f"{said}: a workflow's own requests take its id, as in client.{instead}({workflow})"
    jobs = "handle.job_ids" if hasattr(value, "job_ids") else f"client.workflow_jobs({workflow})"
    return f"{said}: to run after a whole workflow, give its jobs, as in after={jobs}"


# A placeholder target for building the options of a job that calls no target.
_NO_TARGET = "taskq:_"
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def python_exec_spec(
    code: str,
    function: str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> JobSpec:
    """A job that runs ``code`` as a module, then calls its ``function`` with JSON arguments.

    The seed design's ``python_exec`` payload; a worker runs it only when
    ``allow_python_exec`` is set. ``options`` are those of :func:`call_spec`.
    """
    if not isinstance(code, str) or not code.strip():
        raise errors.InvalidJob("python_exec: code must be a non-empty string", field="code")
    if not isinstance(function, str) or not _IDENTIFIER.fullmatch(function):
        raise errors.InvalidJob(
            f"python_exec: function must be the name of a function the code defines, "
            f"got {function!r}",
            field="function",
        )
    payload = {
        "code": code,
        "function": function,
        "args": list(args) if isinstance(args, list | tuple) else args,
        "kwargs": {} if kwargs is None else kwargs,
    }
    return _with_payload(PayloadKind.PYTHON_EXEC, payload, options)


def shell_spec(
    command: str | Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> JobSpec:
    """A job that runs a command: a string through ``/bin/sh -c``, a list as argv, unparsed.

    ``env`` is laid over the worker's job environment; a worker runs it only
    when ``allow_shell`` is set. Its result is ``{"exit_code": 0, "stdout": ...,
    "stdout_truncated": ...}``; a non-zero exit is a failed attempt.
    ``options`` are those of :func:`call_spec`.
    """
    if isinstance(command, str):
        if not command.strip():
            raise errors.InvalidJob("shell: the command is empty", field="argv")
        argv = ["/bin/sh", "-c", command]
    elif command and all(isinstance(part, str) for part in command):
        argv = list(command)
    else:
        raise errors.InvalidJob(
            "shell: the command must be a string or a non-empty list of strings", field="argv"
        )
    if cwd is not None and not isinstance(cwd, str):
        raise errors.InvalidJob(f"shell: cwd must be a string, got {cwd!r}", field="cwd")
    variables = dict(env or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in variables.items()):
        raise errors.InvalidJob("shell: env must map strings to strings", field="env")
    return _with_payload(PayloadKind.SHELL, {"argv": argv, "cwd": cwd, "env": variables}, options)


def check_options(options: Mapping[str, Any]) -> None:
    """Raise :class:`taskq.errors.InvalidJob` where the broker would refuse these options."""
    validate_spec(call_spec(_NO_TARGET, **options))


def _with_payload(kind: PayloadKind, payload: dict[str, Any], options: dict[str, Any]) -> JobSpec:
    # Through call_spec, so that every kind of job takes the same options, kept the same way.
    return msgspec.structs.replace(call_spec(_NO_TARGET, **options), kind=kind, payload=payload)


def function_target(function: Callable[..., Any]) -> str:
    """``"pkg.module:function"``: where a worker imports ``function`` from.

    Refused (:class:`taskq.errors.InvalidJob`) unless a worker can import it
    by that name: a function defined inside another, a lambda, one of the
    script being run (``__main__``), one its module no longer holds by name.
    """
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise errors.InvalidJob(
            f"{function!r} is not a function a worker can import by name", field="target"
        )
    if "<" in qualname:
        raise errors.InvalidJob(
            f"{module}.{qualname} is defined inside a function or is a lambda: a worker "
            "imports a job by name, so a job must be defined at the top of a module",
            field="target",
        )
    if worker_policy.of_the_standard_library(module):
        raise errors.InvalidJob(
            worker_policy.standard_library_advice(f"{module}:{qualname}"), field="target"
        )
    if module == "__main__":
        raise errors.InvalidJob(
            f"{qualname} is defined in __main__, the script being run: a worker imports a job "
            "by module, so move it into a module it can import (mypkg/tasks.py, say)",
            field="target",
        )
    found: object = sys.modules.get(module)
    for attribute in qualname.split("."):
        found = getattr(found, attribute, None)
    if found is None:
        raise errors.InvalidJob(
            f"{module} holds no {qualname}: a worker would not find the job by that name",
            field="target",
        )
    return f"{module}:{qualname}"


def check_call(
    function: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    """Refuse arguments that ``function``'s signature does not take, as calling it would,
    or that its annotations refuse, as a submit of it by name does: a job is checked the
    same however it is named, in the same words."""
    declaration = _declaration_of(function)
    if declaration is None:
        return  # no signature to read (some built-ins): the worker's call will tell
    options = sorted(set(kwargs) & SUBMIT_OPTIONS)
    hint = (
        f" (a job's options go in {_short_name(function)}.options({options[0]}=...), "
        "not among its arguments)"
        if options
        else ""
    )
    check_arguments(declaration, args, kwargs, hint=hint)


def _short_name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__qualname__", repr(function)))


def _declaration_of(function: Callable[..., Any]) -> Declaration | None:
    """``function`` as a worker publishes it (None: it has no signature), read once for a
    function, as a batch checks each of its calls against it; each time for a callable
    object that cannot be a cache's key."""
    try:
        return _declaration_of_hashable(function)
    except TypeError:
        return _declaration(function)


@functools.lru_cache(maxsize=1024)
def _declaration_of_hashable(function: Callable[..., Any]) -> Declaration | None:
    return _declaration(function)


def _declaration(function: Callable[..., Any]) -> Declaration | None:
    # Its published parameters are read from this same signature, so they bind as it does.
    try:
        inspect.signature(function)
    except (TypeError, ValueError):
        return None
    module = getattr(function, "__module__", None)
    name = _short_name(function)
    return Declaration(
        name=f"{module}:{name}" if module else name, parameters=parameters_of(function)
    )


@runtime_checkable
class JobDeclaration(Protocol):
    """A job declared with its options (:func:`taskq.job`): it describes a call of itself."""

    def spec(self, *args: Any, **kwargs: Any) -> JobSpec:
        """The job that calls it with these arguments, with its declared options."""
        ...


Target: TypeAlias = "str | JobDeclaration | Callable[..., Any]"
"""What submit takes: ``"pkg.module:function"``, a declared job or a module-level function."""
Calls: TypeAlias = "Iterable[tuple[Any, ...] | Mapping[str, Any]]"
"""Many calls of one target: each a tuple of positional or a dict of keyword arguments."""


def validate_spec(spec: JobSpec, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
    """Raise :class:`taskq.errors.InvalidJob` where the broker would refuse ``spec``.

    The very checks an enqueue makes, without a request: a form can show a
    refusal at once.
    """
    checked_row(spec, max_payload_bytes=max_payload_bytes)


# The options of a job, by keyword: call_spec's (target and args are the call's own).
SUBMIT_OPTIONS = frozenset(inspect.signature(call_spec).parameters) - {"target", "args"}


def check_option_names(keywords: Mapping[str, Any], caller: str = "submit") -> None:
    """Refuse keywords that are not options of a job by name (its arguments go in kwargs).

    ``caller`` names the function the keywords were given to (``submit``, ``step``).
    """
    if not keywords.keys() <= SUBMIT_OPTIONS:
        unknown = sorted(set(keywords) - SUBMIT_OPTIONS)
        raise errors.InvalidJob(
            f"unknown option(s) {', '.join(unknown)}{did_you_mean(unknown, SUBMIT_OPTIONS)}; "
            f'{caller}("pkg.mod:f", ...) takes the call\'s positional arguments, then the '
            f"options {', '.join(sorted(SUBMIT_OPTIONS))}; the call's keyword arguments go in "
            f"kwargs={{{', '.join(f'{name!r}: ...' for name in unknown)}}}",
            field=unknown[0],
        )


def spec_of(
    target: Target, args: Sequence[Any], keywords: dict[str, Any], caller: str = "submit"
) -> JobSpec:
    """The job of a call of ``target``: a function's keywords are its own, a string's options
    (``caller`` names the function they were given to, for the refusal of one that is not)."""
    if isinstance(target, str):
        # "pkg.module:function". Asked first: a check against the protocol
        # JobDeclaration costs more than the rest of building the job.
        check_option_names(keywords, caller)
        return call_spec(target, args, **keywords)
    if isinstance(target, JobDeclaration):
        return target.spec(*args, **keywords)
    if callable(target):
        check_call(target, args, keywords)
        return call_spec(function_target(target), args, keywords)
    return call_spec(target, args, keywords)  # refused as a target there
