"""What ``Client`` and ``AsyncClient`` share: how a job is described, and how it is submitted.

:class:`ClientBase` holds the store, the submitter and the group commit, and
builds the plan of each submit; the other requests are declared in
:mod:`taskq.broker.client.operations`.
"""

from __future__ import annotations

import getpass
import inspect
import re
import socket
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import msgspec

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client import declarations
from taskq.broker.client.connect import open_store
from taskq.broker.client.group_commit import GroupCommit, GroupOp, Signal
from taskq.broker.client.wake_sender import WakeSender
from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES, checked_row, job_enqueue
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import JobSpec, PayloadKind, SubmittedWorkflow
from taskq.broker.stores.store import Store
from taskq.broker.stores.wake_hints import HintedStore
from taskq.config import load_config
from taskq.retry import RetryPolicy, parse_retry

if TYPE_CHECKING:
    from taskq.broker.client.flows import Flow


def default_submitter() -> str:
    """``user@host`` of this process: who submitted a job, unless a client says otherwise."""
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

    ``after`` lists the jobs (handles or ids) this one runs after: it waits
    until each has ended, and is cancelled when one ends without succeeding,
    unless ``run_anyway``.
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


@runtime_checkable
class HasJobId(Protocol):
    """A job's handle or record: anything with the job's ``id``."""

    @property
    def id(self) -> int: ...


JobRef: TypeAlias = "int | HasJobId"
"""A stored job, by id or by anything that carries it (a handle, a ``Job``)."""


def job_ids(jobs: Sequence[JobRef]) -> tuple[int, ...]:
    """The ids of ``jobs``, each a handle or an id; :class:`taskq.errors.InvalidJob` else."""
    if isinstance(jobs, str | bytes) or not isinstance(jobs, Sequence):
        raise errors.InvalidJob(
            f"after takes a list of jobs (handles or ids), not {type(jobs).__name__}",
            field="after",
        )
    return tuple(_job_id(job) for job in jobs)


def _job_id(job: object) -> int:
    if isinstance(job, HasJobId):
        job = job.id
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    raise errors.InvalidJob(
        f"after: {job!r} is not a job; give its handle or its id", field="after"
    )


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
    """Refuse arguments that ``function``'s signature does not take, as calling it would."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # no signature to read (some built-ins): the worker's call will tell
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        name = getattr(function, "__qualname__", repr(function))
        options = sorted(set(kwargs) & SUBMIT_OPTIONS)
        hint = (
            f" (a job's options go in {name}.options({options[0]}=...), not among its arguments)"
            if options
            else ""
        )
        raise errors.InvalidJob(f"{name}(): {exc}{hint}", field="args") from None


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


def check_option_names(keywords: Mapping[str, Any]) -> None:
    """Refuse keywords that are not options of a submit by name (its arguments go in kwargs)."""
    if not keywords.keys() <= SUBMIT_OPTIONS:
        unknown = sorted(set(keywords) - SUBMIT_OPTIONS)
        raise errors.InvalidJob(
            f"unknown option(s) {', '.join(unknown)}; submit takes the call's arguments, "
            f"then {', '.join(sorted(SUBMIT_OPTIONS))}"
        )


def spec_of(target: Target, args: Sequence[Any], keywords: dict[str, Any]) -> JobSpec:
    """The job of a call of ``target``: a function's keywords are its own, a string's options."""
    if isinstance(target, str):
        # "pkg.module:function". Asked first: a check against the protocol
        # JobDeclaration costs more than the rest of building the job.
        check_option_names(keywords)
        return call_spec(target, args, **keywords)
    if isinstance(target, JobDeclaration):
        return target.spec(*args, **keywords)
    if callable(target):
        check_call(target, args, keywords)
        return call_spec(function_target(target), args, keywords)
    return call_spec(target, args, keywords)  # refused as a target there


class ClientBase:
    """The store a client talks to, who it submits as, and the plan of each of its requests."""

    def __init__(
        self,
        store_url: str | None = None,
        *,
        config_path: str | Path | None = None,
        store: Store | None = None,
        submitter: str | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        """Open the store named as everywhere in taskq, or use ``store``, already open.

        ``max_payload_bytes`` bounds a job's payload, its arguments included, as JSON.
        """
        self.store = store if store is not None else open_store(store_url, config_path=config_path)
        self.submitter = submitter if submitter is not None else default_submitter()
        self.max_payload_bytes = max_payload_bytes
        # Idle workers on a cluster hear of a submit at once (taskq/broker/client/wake_sender.py).
        self._wake_sender = WakeSender() if isinstance(self.store, HintedStore) else None
        # The config file's [queues.NAME] defaults, which this client's jobs get (a store
        # handed over open comes without a config, unless one is named).
        self.queue_defaults = (
            load_config(config_path).queues if store is None or config_path is not None else {}
        )
        # The declarations that submits by name read (taskq/broker/client/declarations.py).
        self.declarations = declarations.DeclarationCache()
        # Single submits made while another is in flight share its successor's write.
        self._group_commit = GroupCommit(self._submit_many_plan, self._check_one, self._new_signal)

    def _new_signal(self) -> Signal:
        """What a submit waiting for its group's turn waits on: an event threads block on."""
        return threading.Event()

    def _check_one(self, spec: JobSpec) -> None:
        """Refuse ``spec`` as a submit of it alone would, before it joins a group."""
        validate_spec(self._with_queue_defaults(spec), max_payload_bytes=self.max_payload_bytes)

    def _with_queue_defaults(self, spec: JobSpec) -> JobSpec:
        """``spec`` with what it leaves out taken from this client's config for its queue."""
        if not isinstance(spec, JobSpec) or not isinstance(spec.queue, str):
            return spec  # refused by the enqueue's checks, as it is
        defaults = self.queue_defaults.get(spec.queue)
        if defaults is None:
            return spec
        return msgspec.structs.replace(
            spec,
            timeout=defaults.timeout if spec.timeout is None else spec.timeout,
            max_attempts=defaults.max_attempts if spec.max_attempts is None else spec.max_attempts,
            limits={**defaults.limits, **spec.limits}
            if isinstance(spec.limits, dict)
            else spec.limits,
            retry=defaults.retry if spec.retry is None else spec.retry,
        )

    def validate_spec(self, spec: JobSpec) -> None:
        """Raise :class:`taskq.errors.InvalidJob` where a submit of ``spec`` would be refused."""
        validate_spec(spec, max_payload_bytes=self.max_payload_bytes)

    # -- jobs ---------------------------------------------------------------------

    def _submit_many_plan(self, specs: Sequence[JobSpec]) -> Op[list[int]]:
        if self.queue_defaults:
            specs = [self._with_queue_defaults(spec) for spec in specs]
        ids = yield from job_enqueue(specs, max_payload_bytes=self.max_payload_bytes)
        if self._wake_sender is not None:
            yield from self._wake_sender.after_submit({spec.queue for spec in specs})
        return ids

    def _submit_workflow_plan(
        self, flow: Flow, name: str, idempotency_key: str | None
    ) -> Op[SubmittedWorkflow]:
        """One workflow's write: its jobs with this client's queue defaults, all or nothing."""
        if not len(flow):
            raise errors.InvalidJob("a workflow needs at least one step", field="flow")
        submission = flow.submission(
            name=name,
            idempotency_key=idempotency_key,
            submitter=self.submitter,
            max_payload_bytes=self.max_payload_bytes,
        )
        if self.queue_defaults:
            jobs = tuple(self._with_queue_defaults(spec) for spec in submission.jobs)
            submission = msgspec.structs.replace(submission, jobs=jobs)
        submitted = yield from workflow_submit(submission, max_payload_bytes=self.max_payload_bytes)
        if self._wake_sender is not None:
            yield from self._wake_sender.after_submit({spec.queue for spec in submission.jobs})
        return submitted

    def _submit_plan(
        self, target: Target, args: Sequence[Any], keywords: dict[str, Any]
    ) -> GroupOp[int]:
        # A name is submitted as its declaration says, unless the caller opts out.
        if isinstance(target, str) and not keywords.pop("unchecked", False):
            return self._submit_by_name_plan(target, args, keywords)
        return self._submit_spec_plan(self._spec_of(target, args, keywords))

    def _submit_by_name_plan(
        self, target: str, args: Sequence[Any], keywords: dict[str, Any]
    ) -> GroupOp[int]:
        keywords.setdefault("submitter", self.submitter)
        spec = yield from self.declarations.spec(target, args, keywords)
        return (yield from self._submit_spec_plan(spec))

    def _spec_of(self, target: Target, args: Sequence[Any], keywords: dict[str, Any]) -> JobSpec:
        """The job of one submit, submitted by this client unless it says otherwise."""
        if isinstance(target, str):
            # An option given, even a bad one, is the caller's: checked, not replaced.
            keywords.setdefault("submitter", self.submitter)
            return spec_of(target, args, keywords)
        spec = spec_of(target, args, keywords)
        return spec if spec.submitter else msgspec.structs.replace(spec, submitter=self.submitter)

    def _many_specs(
        self, jobs: Sequence[JobSpec] | Target, calls: Calls | None
    ) -> Sequence[JobSpec]:
        """The jobs of one submit_many: given as specs, or one per call of a target.

        Each call is a tuple of positional or a dict of keyword arguments.
        """
        if isinstance(jobs, Sequence) and not isinstance(jobs, str):
            if calls is not None:
                raise errors.InvalidJob(
                    "submit_many(target, calls): the target is one job, not a list", field="target"
                )
            return jobs
        if calls is None:
            raise errors.InvalidJob(
                "submit_many takes a list of jobs, or a target and its calls", field="target"
            )
        target: Target = jobs
        specs = []
        for call in calls:
            if isinstance(call, tuple):
                args, kwargs = call, {}
            elif isinstance(call, Mapping):
                args, kwargs = (), dict(call)
            else:
                raise errors.InvalidJob(
                    "each call is a tuple of positional arguments or a dict of keyword "
                    f"arguments, not {type(call).__name__}",
                    field="args",
                )
            if isinstance(target, str):
                specs.append(call_spec(target, args, kwargs, submitter=self.submitter))
            else:
                specs.append(self._spec_of(target, args, kwargs))
        return specs

    def _submit_python_plan(
        self, code: str, function: str, args: Sequence[Any], options: dict[str, Any]
    ) -> GroupOp[int]:
        options.setdefault("submitter", self.submitter)
        return self._submit_spec_plan(python_exec_spec(code, function, args, **options))

    def _submit_shell_plan(
        self,
        command: str | Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        options: dict[str, Any],
    ) -> GroupOp[int]:
        options.setdefault("submitter", self.submitter)
        return self._submit_spec_plan(shell_spec(command, cwd=cwd, env=env, **options))

    def _submit_spec_plan(self, spec: JobSpec) -> GroupOp[int]:
        """One job's enqueue, in a write shared with concurrent submits (run by group_commit)."""
        return self._group_commit.submit(spec)
