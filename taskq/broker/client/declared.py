"""Declared jobs: a function made a job with its options, next to its code.

```python
@taskq.job(queue="images", max_attempts=5, timeout=60)
def resize(path: str, width: int) -> str: ...

resize.submit("in.png", width=800)                 # enqueued with the declared options
resize.options(queue="gpu", delay=60).submit(...)   # some of them changed for these calls
resize.submit_many([("a.png", 800), ("b.png", 400)])
resize("in.png", 800)                               # a plain call, run here
resize.map(paths, width=800).then(build_index)      # a workflow, to submit whole
cleanup.then(report)                                # bare: a step without arguments
```

The options are those of :func:`taskq.call_spec`, by name, checked when the
job is declared. A declared job submits through its ``client=``, else the
default client (:func:`taskq.set_default_client`, or the default store);
``client.submit(resize, ...)`` sends it through any client. Every argument
of ``submit`` is the job's own: options change only through ``options()``.
A worker imports the job by its module and name (``mypkg.tasks:resize``),
so it must be defined at the top of a module the worker is given.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from taskq import errors
from taskq.broker.client import celery_habits, job_options
from taskq.broker.client.client import Client, JobHandle
from taskq.broker.client.flows import Flow, as_flow, fan_out, step
from taskq.broker.client.importable import describe
from taskq.broker.client.specs import (
    SUBMIT_OPTIONS,
    Calls,
    Target,
    call_spec,
    check_call,
    check_options,
    function_target,
)
from taskq.broker.ops.functions import Declaration
from taskq.broker.records import JobSpec
from taskq.close_names import did_you_mean

P = ParamSpec("P")
R = TypeVar("R")

# A job's options: the call's own keyword arguments are not one of them.
JOB_OPTIONS = SUBMIT_OPTIONS - {"kwargs"}
# Options that name submitted jobs (after) or one submit (idempotency_key: declared, every
# submit of the job would share one key, and all but the first be refused or deduplicated):
# given for some calls (``options``), never declared.
_PER_CALL = {
    "after": "names jobs already submitted",
    "idempotency_key": "names one submit (declared, every submit would share it)",
}


class DeclaredJob(Generic[P, R]):
    """A function declared a job (:func:`job`): called, it runs here; submitted, on a worker."""

    def __init__(
        self,
        function: Callable[P, R],
        options: Mapping[str, Any],
        client: Client | None,
        given: Mapping[str, Any] | None = None,
    ) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.declared_options = dict(options)
        self.client = client
        # Those of the options given through options(), not declared: a submit alone
        # refuses run_anyway given without after (taskq.broker.client.lone_submit).
        self.options_given = dict(given or {})

    def __repr__(self) -> str:
        options = "".join(f", {name}={value!r}" for name, value in self.declared_options.items())
        return f"<taskq job {self.function.__module__}:{self.function.__qualname__}{options}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here, as if it were not a job."""
        return self.function(*args, **kwargs)

    def options(self, *, client: Client | None = None, **options: Any) -> DeclaredJob[P, R]:
        """This job with some options changed (any of :func:`job`'s), for the calls made of it."""
        _check_options(options, f"{self.function.__qualname__}.options")
        return DeclaredJob(
            self.function,
            job_options.over_declared(self.declared_options, options),
            client or self.client,
            {**self.options_given, **options},
        )

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> JobSpec:
        """The job that calls this with these arguments (for schedules and batches).

        The arguments are checked against the function's signature now, as a
        call would (:class:`taskq.errors.InvalidJob`).
        """
        check_call(self.function, args, kwargs)
        return call_spec(function_target(self), args, kwargs, **self.declared_options)

    def submit(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle:
        """Enqueue a call with these arguments; the handle of the job."""
        return self._client().submit(self, *args, **kwargs)

    def step(self, *args: P.args, **kwargs: P.kwargs) -> Flow:
        """A call with these arguments as a step of a workflow (see :meth:`Flow.then`)."""
        return step(self, *args, **kwargs)

    def then(self, following: Flow | Target, /) -> Flow:
        """This job as a step without arguments, then ``following``: ``cleanup.then(report)``
        is ``cleanup.step().then(report)`` (see :meth:`Flow.then`)."""
        return as_flow(self).then(following)

    def map(self, items: Iterable[Any], /, *args: Any, **kwargs: Any) -> Flow:
        """One step per item, side by side: ``self(item, *args, **kwargs)`` for each.

        ``resize.map(paths, width=800).then(build_index)`` resizes every path,
        then builds the index once they all have ended.
        """
        return fan_out(self, items, args, kwargs)

    def submit_many(self, calls: Calls) -> list[JobHandle]:
        """Enqueue one job per call, in one request: each a tuple of positional or a dict of
        keyword arguments, as in ``resize.submit_many([("a.png", 800), {"path": "b.png"}])``.
        """
        return self._client().submit_many(self, calls)

    def _client(self) -> Client:
        return self.client if self.client is not None else default_client()

    if not TYPE_CHECKING:  # a type checker still flags every name this class lacks

        def __getattr__(self, name: str) -> Any:
            # Not self.function: while unpickled, this runs before it is set.
            function = self.__dict__.get("function")
            called = getattr(function, "__name__", "job")
            raise celery_habits.missing(self, name, celery_habits.DECLARED_JOB, called)


class _JobDoc:
    """``DeclaredJob.__doc__``: the class's docstring; on a job, what ``help(resize)`` shows.

    pydoc shows an object other than a function by its ``__doc__``, and one
    without (a function with no docstring) as its class, whose constructor's
    signature would pass for the job's. So a job's doc starts with the
    function's signature and says how it is used. Read when asked: ``options()``
    makes a job per call.
    """

    def __init__(self, doc: str | None) -> None:
        self.doc = doc

    def __get__(self, job: DeclaredJob[Any, Any] | None, owner: type[Any]) -> str | None:
        function = None if job is None else job.__dict__.get("function")
        if function is None:  # the class's, or a job not yet unpickled whole
            return self.doc
        name = function.__name__
        try:
            signature = str(inspect.signature(function))
        except (TypeError, ValueError):  # a callable without one: its call is not shown
            signature = "(...)"
        usage = (
            f"A taskq job: {name}.submit(...) queues a call for a worker, "
            f"{name}.options(...) changes its options, {name}(...) runs it here."
        )
        own = inspect.getdoc(function)
        return "\n\n".join(part for part in (f"{name}{signature}", usage, own) if part)

    def __set__(self, job: DeclaredJob[Any, Any], value: object) -> None:
        pass  # functools.update_wrapper copies the function's doc: it is read from there


DeclaredJob.__doc__ = _JobDoc(DeclaredJob.__doc__)  # type: ignore[assignment]


@overload
def job(function: Callable[P, R], /) -> DeclaredJob[P, R]: ...
@overload
def job(
    *, client: Client | None = None, **options: Any
) -> Callable[[Callable[P, R]], DeclaredJob[P, R]]: ...
def job(
    function: Callable[P, R] | None = None, /, *, client: Client | None = None, **options: Any
) -> DeclaredJob[P, R] | Callable[[Callable[P, R]], DeclaredJob[P, R]]:
    """Declare a module-level function a job, with the options its submits take by default.

    ``@taskq.job`` or ``@taskq.job(queue=..., priority=..., timeout=...,
    max_attempts=..., limits=..., labels=..., ...)``: any option of
    :func:`taskq.call_spec` but ``kwargs``. An unknown name or a bad value is
    refused here (:class:`taskq.errors.InvalidJob`), when the module is
    imported. ``client`` is the client its submits go through (default:
    :func:`taskq.default_client`). ``async def`` functions are declared the same way.
    """
    _check_options(options, "taskq.job", declared=True)
    for name in sorted(_PER_CALL.keys() & set(options)):
        raise errors.InvalidJob(
            f"taskq.job: {name} {_PER_CALL[name]}, so it is given per call: "
            f"{name}=... in the job's .options(...)",
            field=name,
        )

    def declare(function: Callable[P, R]) -> DeclaredJob[P, R]:
        return DeclaredJob(function, options, client)

    return declare if function is None else declare(function)


def _check_options(options: Mapping[str, Any], where: str, declared: bool = False) -> None:
    """Refuse unknown option names, and values the broker would refuse, at once.

    ``client`` is among the names a misspelling is matched with (it is taken
    beside the options); ``declared``: for ``taskq.job``, whose list of the
    options leaves out those given per call only (refused there by name).
    """
    for name in sorted(set(options) - JOB_OPTIONS):
        taken = JOB_OPTIONS - _PER_CALL.keys() if declared else JOB_OPTIONS
        raise errors.InvalidJob(
            f"{where}: no option {name!r}{did_you_mean([name], JOB_OPTIONS | {'client'})}; the "
            f"options are {', '.join(sorted(taken))}, and client",
            field=name,
        )
    check_options(options)


# The client declared jobs submit through (``resize.submit(...)``), and the
# process that opened it: a process forked from its opener opens its own.
_default_client: Client | None = None
_default_opened_in: int | None = None
_default_lock = threading.Lock()


def set_default_client(client: Client | None) -> None:
    """Make declared jobs submit through ``client``; ``None`` goes back to the default store.

    Like Dramatiq's ``set_broker``: set it once at start-up, before the first
    ``submit``. A client opened by :func:`default_client` is closed here.
    """
    global _default_client, _default_opened_in
    with _default_lock:
        if _default_opened_in == os.getpid() and _default_client is not None:
            _default_client.close()
        _default_client, _default_opened_in = client, None


def default_client() -> Client:
    """The client declared jobs submit through.

    The one :func:`set_default_client` gave, else a client over the store
    named as everywhere in taskq (``TASKQ_STORE``, the config file, the
    embedded default), opened on first use and closed at exit.
    """
    global _default_client, _default_opened_in
    with _default_lock:
        inherited = _default_opened_in is not None and _default_opened_in != os.getpid()
        if _default_client is None or inherited:
            _default_client, _default_opened_in = Client(), os.getpid()
        return _default_client


@contextlib.contextmanager
def default_client_as(client: Client) -> Iterator[Client]:
    """Make ``client`` the default client for the block, then the one before it again.

    For ``taskq.testing``'s throwaway store: inside the block a declared job's
    ``submit()`` goes to it, not to the store the test's machine names. A client
    the block opened by :func:`default_client` is closed at its end.
    """
    global _default_client, _default_opened_in
    with _default_lock:
        before, before_opened_in = _default_client, _default_opened_in
        _default_client, _default_opened_in = client, None
    try:
        yield client
    finally:
        with _default_lock:
            opened = _default_client
            if opened is not None and opened is not before and _default_opened_in == os.getpid():
                opened.close()
            _default_client, _default_opened_in = before, before_opened_in


# At exit, the default client opened here (if any) is closed.
atexit.register(set_default_client, None)


# -- what a worker publishes of them ------------------------------------------------


def declared_in(module: types.ModuleType) -> list[Declaration]:
    """Every declared job at the top level of ``module`` and of its submodules already
    imported (a package's ``__init__`` importing its jobs' modules), by name, once each."""
    prefix = module.__name__ + "."
    modules = [module] + [
        each for name, each in list(sys.modules.items()) if name.startswith(prefix) and each
    ]
    found = {}
    for each in modules:
        for value in list(vars(each).values()):
            if isinstance(value, DeclaredJob):
                declaration = describe(value)
                found[declaration.name] = declaration
    return [found[name] for name in sorted(found)]
