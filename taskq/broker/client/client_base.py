"""What ``Client`` and ``AsyncClient`` share: how a job is submitted (its description: specs.py).

:class:`ClientBase` holds the store, the submitter and the group commit, and
builds the plan of each submit; the other requests are declared in
:mod:`taskq.broker.client.operations`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import msgspec

from taskq import errors
from taskq.broker.client import declarations, http_plans
from taskq.broker.client.connect import client_url, open_store
from taskq.broker.client.group_commit import GroupCommit, GroupOp, Signal
from taskq.broker.client.http_requests import HttpPlan
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.lone_submit import check_alone, check_submit
from taskq.broker.client.specs import (
    Calls,
    Target,
    call_spec,
    check_option_names,
    default_submitter,
    ids_here,
    job_ids,
    parents_here,
    python_exec_spec,
    shell_spec,
    spec_of,
    validate_spec,
)
from taskq.broker.client.wake_sender import WakeSender
from taskq.broker.ops.enqueue import MAX_PAYLOAD_BYTES, job_enqueue
from taskq.broker.ops.plan import Op
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import JobSpec, SubmittedWorkflow, WorkflowSubmission
from taskq.broker.stores.store import Store

if TYPE_CHECKING:
    from taskq.broker.client.http_transport import HttpTransport
from taskq.broker.stores.store_url import is_http_url
from taskq.broker.stores.wake_hints import HintedStore
from taskq.config import load_config

T = TypeVar("T")

Plan: TypeAlias = GroupOp[T] | HttpPlan[T]
"""A request's plan: on the store, or (a client of an http(s):// URL) over HTTP."""
_SQLITE = "sqlite://"
"""How the URL of an embedded store begins (``SqliteStore.url``), its file's path after it."""
Jobs: TypeAlias = "Sequence[JobSpec | declarations.NamedCall]"
"""The jobs of a ``submit_many(jobs)``: built (:func:`call_spec` and its kin), or calls by
name to be resolved as their declarations say."""


def _named(url: str) -> str:
    """A store's URL as :attr:`ClientBase.store_name` names it: a SQLite file by its real
    path, so that one written relative, through ``..`` or through a symlink is the same
    store (no file is opened: its folders' links are read); any other URL as it is."""
    if not url.startswith(_SQLITE):
        return url
    return _SQLITE + os.path.realpath(url.removeprefix(_SQLITE))


class WorkflowSource(Protocol):
    """What a workflow's submit needs of a flow (:class:`taskq.broker.client.flows.Flow`,
    which builds its jobs from this module's specs and so sits above it)."""

    def __len__(self) -> int: ...

    def by_name(self) -> Mapping[int, declarations.NamedCall]: ...

    def submission(
        self,
        *,
        name: str,
        idempotency_key: str | None,
        submitter: str,
        max_payload_bytes: int,
        declared: Mapping[int, JobSpec] | None,
        store: str | None,
    ) -> WorkflowSubmission: ...


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
        token: str | None = None,
        ca: str | Path | None = None,
        verify: bool = True,
        timeout: float = 30.0,
        import_names: bool = True,
        wait_notes: bool = True,
    ) -> None:
        """Open the store named as everywhere in taskq, or use ``store``, already open.

        ``max_payload_bytes`` bounds a job's payload, its arguments included, as JSON.
        An http(s):// URL names a ``taskq serve`` instead: the requests go over
        HTTP, bearing ``token`` (else ``TASKQ_TOKEN``), TLS checked against the
        system's CAs or ``ca`` (``verify=False``: not checked); ``timeout`` is
        the seconds a request may take, a busy server's 503s ridden out
        included (:class:`taskq.broker.client.http_transport.HttpTransport`).
        The submitter is then the token's name.

        ``import_names``: a submit by a name no worker has declared takes the
        function this process imports by that name, as a submit of the
        function itself would (:mod:`taskq.broker.client.importable`); taskq
        serve and the command line turn it off, and over HTTP the server alone
        resolves names. ``wait_notes``: a wait says why its job has not started
        (``wait``); taskq serve, whose waits are its callers', turns it off.
        """
        self.wait_notes = wait_notes
        url = None
        if store is None:
            url = client_url(store_url, config_path)
        self.http: HttpTransport | None = None
        if url is not None and is_http_url(url):
            # Imported here: httpx, which only this transport needs, is a fifth of a
            # second of every start on a store, the command line's included.
            from taskq.broker.client.http_transport import HttpTransport

            self.http = HttpTransport(url, token=token, ca=ca, verify=verify, timeout=timeout)
        self._store = store
        if store is None and self.http is None:
            self._store = open_store(url, config_path=config_path)
        self.submitter = submitter if submitter is not None else default_submitter()
        self.max_payload_bytes = max_payload_bytes
        # Idle workers on a cluster hear of a submit at once (taskq/broker/client/wake_sender.py).
        self._wake_sender = WakeSender() if isinstance(self._store, HintedStore) else None
        # The config file's [queues.NAME] defaults, which this client's jobs get (a store
        # handed over open comes without a config, unless one is named).
        self.queue_defaults = (
            load_config(config_path).queues if store is None or config_path is not None else {}
        )
        # Which store this client's job ids are of, worked out once: see store_name.
        self._store_name = self.http.url if self.http is not None else _named(self.store.url)
        # The declarations that submits by name read (taskq/broker/client/declarations.py).
        self.declarations = declarations.DeclarationCache(import_names=import_names)
        # Single submits made while another is in flight share its successor's write.
        self._group_commit = GroupCommit(self._submit_many_plan, self._check_one, self._new_signal)

    @property
    def store(self) -> Store:
        """The store this client talks to; :class:`taskq.errors.NotOverHttp` over HTTP."""
        if self._store is None:
            raise errors.NotOverHttp(
                f"this client speaks HTTP to {self.http.url if self.http else 'a server'}: "
                "it has no store; open one on the store's URL for this"
            )
        return self._store

    @property
    def store_name(self) -> str:
        """The store this client's job ids are of, by its URL: the taskq serve's over HTTP,
        else the store's own (a SQLite file by its real path, a cluster by the nodes its
        URL lists), options and password left out. A job's handle carries it, so that a
        job is not made to wait on another store's job that happens to have its id.

        A client over HTTP and one on the served store itself are of two stores here.
        """
        return self._store_name

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
        validate_spec(parents_here(spec, self.store_name), max_payload_bytes=self.max_payload_bytes)

    # -- jobs ---------------------------------------------------------------------

    def _submit_many_plan(self, specs: Sequence[JobSpec]) -> Op[list[int]]:
        if self.queue_defaults:
            specs = [self._with_queue_defaults(spec) for spec in specs]
        ids = yield from job_enqueue(specs, max_payload_bytes=self.max_payload_bytes)
        if self._wake_sender is not None:
            yield from self._wake_sender.after_submit({spec.queue for spec in specs})
        return ids

    def _submit_workflow_plan(
        self,
        flow: WorkflowSource,
        name: str,
        idempotency_key: str | None,
        submitter: str | None = None,
    ) -> Plan[SubmittedWorkflow]:
        """One workflow's write: its jobs with this client's queue defaults, all or nothing.

        Its steps given by name are resolved first, all of them or none
        (:meth:`declarations.DeclarationCache.spec_many`); over HTTP, by the server.
        """
        if not len(flow):
            raise errors.InvalidJob("a workflow needs at least one step", field="flow")
        if self.http is not None:
            return self._workflow_over_http(flow, name, idempotency_key, submitter)
        return self._workflow_on_the_store(flow, name, idempotency_key, submitter)

    def _workflow_on_the_store(
        self,
        flow: WorkflowSource,
        name: str,
        idempotency_key: str | None,
        submitter: str | None,
    ) -> Op[SubmittedWorkflow]:
        calls = flow.by_name()
        resolved = yield from self.declarations.spec_many(list(calls.values()))
        submission = flow.submission(
            name=name,
            idempotency_key=idempotency_key,
            submitter=self.submitter if submitter is None else submitter,
            max_payload_bytes=self.max_payload_bytes,
            declared=dict(zip(calls, resolved, strict=True)),
            store=self.store_name,
        )
        if self.queue_defaults:
            jobs = tuple(self._with_queue_defaults(spec) for spec in submission.jobs)
            submission = msgspec.structs.replace(submission, jobs=jobs)
        submitted = yield from workflow_submit(submission, max_payload_bytes=self.max_payload_bytes)
        if self._wake_sender is not None:
            yield from self._wake_sender.after_submit({spec.queue for spec in submission.jobs})
        return submitted

    def _workflow_over_http(
        self,
        flow: WorkflowSource,
        name: str,
        idempotency_key: str | None,
        submitter: str | None,
    ) -> HttpPlan[SubmittedWorkflow]:
        """POST /workflows of the flow, checked here first: its steps by name as calls for the
        server to resolve (all or none), the rest as built, each with its parents."""
        if submitter is not None:
            raise errors.InvalidJob(
                "over HTTP the submitter is the name of the client's token, not an option",
                field="submitter",
            )
        submission = flow.submission(
            name=name,
            idempotency_key=idempotency_key,
            submitter="",
            max_payload_bytes=self.max_payload_bytes,
            declared=None,
            store=self.store_name,
        )
        calls = flow.by_name()
        bodies = []
        for index, spec in enumerate(submission.jobs):
            call = calls.get(index)
            body = (
                http_plans.by_name_body(call.target, call.args, self._call_here(call.options))
                if call is not None
                else msgspec.to_builtins(JobRequest.of_spec(spec))
            )
            parents = submission.parents[index] if index < len(submission.parents) else ()
            bodies.append({**body, "parents": list(parents)})
        return http_plans.submit_workflow(bodies, name, idempotency_key)

    def _submit_plan(
        self, target: Target, args: Sequence[Any], keywords: dict[str, Any]
    ) -> Plan[int]:
        check_submit(target, keywords)
        # A name is submitted as its declaration says, unless the caller opts out.
        if isinstance(target, str) and not keywords.pop("unchecked", False):
            keywords = self._call_here(keywords)
            if self.http is not None:  # the server resolves it
                # Its options refused here in a store client's words, not the body parser's.
                check_option_names(keywords)
                return http_plans.submit_job(http_plans.by_name_body(target, args, keywords))
            return self._submit_by_name_plan(target, args, keywords)
        return self._submit_spec_plan(self._spec_of(target, args, keywords))

    def _submit_by_name_plan(
        self, target: str, args: Sequence[Any], keywords: dict[str, Any]
    ) -> GroupOp[int]:
        keywords.setdefault("submitter", self.submitter)
        spec = yield from self.declarations.spec(target, args, keywords)
        return (yield from self._group_commit.submit(spec))

    def _spec_of(self, target: Target, args: Sequence[Any], keywords: dict[str, Any]) -> JobSpec:
        """The job of one submit, submitted by this client unless it says otherwise."""
        if isinstance(target, str):
            # An option given, even a bad one, is the caller's: checked, not replaced.
            keywords.setdefault("submitter", self.submitter)
            return spec_of(target, args, keywords)
        spec = spec_of(target, args, keywords)
        return spec if spec.submitter else msgspec.structs.replace(spec, submitter=self.submitter)

    def _submit_calls_plan(
        self, jobs: Jobs | Target, calls: Calls | None, unchecked: bool
    ) -> Plan[list[int]]:
        """One submit_many: its jobs built (see :meth:`_many_specs`), then written together."""
        if calls is not None:  # a target's options, if any, are its options()'
            check_submit(jobs, {})
        elif isinstance(jobs, Sequence) and not isinstance(jobs, str):
            for job in jobs:  # a JobSpec is taken as built
                if isinstance(job, declarations.NamedCall):
                    check_alone(job.options, job.target)
        if self.http is not None:
            return http_plans.submit_jobs(self._many_bodies(jobs, calls, unchecked))
        return self._store_submit_calls(jobs, calls, unchecked)

    def _store_submit_calls(
        self, jobs: Jobs | Target, calls: Calls | None, unchecked: bool
    ) -> Op[list[int]]:
        specs = yield from self._many_specs(jobs, calls, unchecked)
        here = [parents_here(spec, self.store_name) for spec in specs]
        return (yield from self._submit_many_plan(here))

    def _many_bodies(
        self, jobs: Jobs | Target, calls: Calls | None, unchecked: bool
    ) -> list[http_plans.JobBody]:
        """The bodies of one submit_many over HTTP: the calls of a name for the server to
        resolve (all or none), unless ``unchecked``; else the jobs as built here."""
        many = _many(jobs, calls)
        if not isinstance(many, tuple):
            return [
                http_plans.by_name_body(job.target, job.args, self._call_here(job.options))
                if isinstance(job, declarations.NamedCall)
                else self._request_here(job)
                for job in many
            ]
        target, arguments = many
        if isinstance(target, str) and not unchecked:
            return [
                http_plans.by_name_body(target, args, {"kwargs": kwargs})
                for args, kwargs in arguments
            ]
        if isinstance(target, str):
            return [
                JobRequest.of_spec(call_spec(target, args, kwargs)) for args, kwargs in arguments
            ]
        return [
            self._request_here(self._entry(i, target, a, k)) for i, (a, k) in enumerate(arguments)
        ]

    def _request_here(self, spec: JobSpec) -> JobRequest:
        """The body of ``spec``, its parents plain ids of this client's store
        (:func:`parents_here`)."""
        return JobRequest.of_spec(parents_here(spec, self.store_name))

    def _call_here(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options of a call by name, its parents plain ids of this client's store
        (:func:`parents_here`): as a body the server resolves can carry them."""
        given = dict(options)
        if given.get("after") is not None:
            given["after"] = list(ids_here(job_ids(given["after"]), self.store_name))
        return given

    def _many_specs(
        self, jobs: Jobs | Target, calls: Calls | None, unchecked: bool
    ) -> Op[Sequence[JobSpec]]:
        """The jobs of one submit_many: given as specs or calls by name, or one per call of
        a target.

        Each call is a tuple of positional or a dict of keyword arguments. The
        calls of a name are submitted as its declaration says, all or none,
        unless ``unchecked`` (:meth:`declarations.DeclarationCache.spec_many`).
        """
        many = _many(jobs, calls)
        if not isinstance(many, tuple):
            named = [job for job in many if isinstance(job, declarations.NamedCall)]
            declared = iter((yield from self._named_specs_plan(named)) if named else [])
            return [
                next(declared) if isinstance(job, declarations.NamedCall) else job for job in many
            ]
        target, arguments = many
        if isinstance(target, str) and not unchecked:
            named = [
                declarations.NamedCall(
                    target,
                    args,
                    {"kwargs": kwargs, "submitter": self.submitter},
                    declarations.batch_entry(index),
                )
                for index, (args, kwargs) in enumerate(arguments)
            ]
            return (yield from self.declarations.spec_many(named))
        if isinstance(target, str):
            return [
                call_spec(target, args, kwargs, submitter=self.submitter)
                for args, kwargs in arguments
            ]
        return [self._entry(i, target, a, k) for i, (a, k) in enumerate(arguments)]

    def _entry(self, index: int, target: Target, args: Sequence[Any], kwargs: Any) -> JobSpec:
        """The job of a batch's call at ``index``, a refusal naming it, as a name's calls are."""
        try:
            return self._spec_of(target, args, kwargs)
        except errors.InvalidJob as exc:
            raise declarations.named(exc, declarations.batch_entry(index)) from None

    def _named_specs_plan(self, calls: Sequence[declarations.NamedCall]) -> Op[list[JobSpec]]:
        """The jobs of calls by name, each as its declaration says, submitted by this client
        unless a call says otherwise; the first refused raises, named by its ``where``."""
        return self.declarations.spec_many(
            [
                dataclasses.replace(call, options={"submitter": self.submitter, **call.options})
                for call in calls
            ]
        )

    def _submit_python_plan(
        self, code: str, function: str, args: Sequence[Any], options: dict[str, Any]
    ) -> Plan[int]:
        check_alone(options, "submit_python")
        options.setdefault("submitter", self.submitter)
        return self._submit_spec_plan(python_exec_spec(code, function, args, **options))

    def _submit_shell_plan(
        self,
        command: str | Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        options: dict[str, Any],
    ) -> Plan[int]:
        check_alone(options, "submit_shell")
        options.setdefault("submitter", self.submitter)
        return self._submit_spec_plan(shell_spec(command, cwd=cwd, env=env, **options))

    def _submit_spec_plan(self, spec: JobSpec) -> Plan[int]:
        """One job's enqueue, in a write shared with concurrent submits (run by group_commit);
        over HTTP, one POST (the server shares its writes)."""
        spec = parents_here(spec, self.store_name)
        if self.http is not None:
            self._check_one(spec)  # refused here, as on the store, before a request is made
            return http_plans.submit_job(JobRequest.of_spec(spec))
        return self._group_commit.submit(spec)


def _many(
    jobs: Jobs | Target, calls: Calls | None
) -> Jobs | tuple[Target, list[tuple[Sequence[Any], dict[str, Any]]]]:
    """A submit_many's jobs as given (specs, calls by name), or its target and each call's
    arguments."""
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
    return jobs, [_call_arguments(call) for call in calls]


def _call_arguments(call: object) -> tuple[Sequence[Any], dict[str, Any]]:
    """A call of submit_many's: a tuple of positional or a dict of keyword arguments."""
    if isinstance(call, tuple):
        return call, {}
    if isinstance(call, Mapping):
        return (), dict(call)
    raise errors.InvalidJob(
        "each call is a tuple of positional arguments or a dict of keyword "
        f"arguments, not {type(call).__name__}",
        field="args",
    )
