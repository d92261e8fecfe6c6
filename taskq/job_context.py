"""The running job as its own code sees it: ``taskq.current_job()``.

Inside a job (in a worker's sandbox child, or run inline by
``taskq.testing``) ``current_job()`` gives the job's id, attempt and queue,
and three ways to talk back: ``progress(fraction, message)``,
``checkpoint(value)`` to save a small JSON value with the job, and
``last_checkpoint()`` to read what an earlier attempt saved, to resume
from there. A job of a workflow reads how its parents ended with
``parent_results()`` and may add jobs to its workflow with ``spawn(flow)``.
Outside a job it raises ``RuntimeError``.

A flow the job's code builds or spawns that is refused (a cycle, a second
spawn) is noted on the context (:func:`refuse`): a job that fails with it
fails for good, as the same code would be refused again on every attempt.

A leaf module, cheap to import: job code imports it in the child. Whoever
runs the job builds the context with a ``send`` that carries each update
(the latest progress and checkpoint together) to the store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec

MAX_CHECKPOINT_BYTES = 64 * 1024
"""The largest checkpoint, as JSON: a cursor or an offset, not the data it points into."""
MAX_MESSAGE_CHARS = 1000
MAX_SPAWN_JOBS = 10_000
"""The most jobs one attempt may spawn (each within the payload bound, as any job)."""
MAX_SPAWN_BYTES = 16 * 1024 * 1024
"""The largest spawn, as JSON: it goes with the job's result to the worker, then to the store."""
# Built once; ASCII, so the length of its text is its size in bytes.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))

_E = TypeVar("_E", bound=BaseException)


class JobUpdate(msgspec.Struct, frozen=True):
    """What a job last said: how far it got, and the checkpoint it last saved (JSON text)."""

    fraction: float
    message: str = ""
    checkpoint_json: str | None = None


class NamedStep(msgspec.Struct, frozen=True):
    """A spawned job given by name (``taskq.step("pkg.mod:f", ...)``, not unchecked).

    The child has no store, so the job goes as written; the worker resolves
    it as its workers declare it before the spawn is written. ``position``:
    the job's in the spawn; ``where``: the step, to name it when refused;
    ``options``: the names of the options the step was given, which win over
    the declared ones (their values are the job's own fields, ``kwargs`` its
    payload's).
    """

    position: int
    where: str
    options: tuple[str, ...] = ()


class _Call(Protocol):
    """A step's call by name as a flow keeps it (``taskq.broker.client.declarations.NamedCall``)."""

    @property
    def where(self) -> str: ...

    @property
    def options(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Spawnable(Protocol):
    """What :meth:`JobContext.spawn` takes: a flow (``taskq.Flow``) of jobs not yet submitted."""

    def __len__(self) -> int: ...

    def submission(self) -> msgspec.Struct:
        """The flow as one request (a ``WorkflowSubmission``), its jobs checked."""
        ...

    def by_name(self) -> Mapping[int, _Call]:
        """The steps given by name, by their positions in the submission."""
        ...


@runtime_checkable
class BareStep(Protocol):
    """A declared job given bare, as in ``spawn(cleanup)``: its step without arguments."""

    def step(self) -> Spawnable:
        """The job as a step of a flow (``cleanup.step()``)."""
        ...


class JobContext:
    """The job being run, for its own code: see :func:`current_job`."""

    def __init__(
        self,
        *,
        id: int,
        attempt: int,
        queue: str,
        max_attempts: int,
        checkpoint_json: str | None = None,
        send: Callable[[JobUpdate], None] | None = None,
        parent_count: int = 0,
        parents: Callable[[], Iterator[Any]] | None = None,
    ) -> None:
        """``parents`` reads the parents' outcomes anew at each call, in declared order."""
        self.id = id
        self.attempt = attempt
        self.queue = queue
        self.max_attempts = max_attempts
        self.parent_count = parent_count
        """How many parents the job has (the jobs it ran after)."""
        self._parents = parents
        self._spawned: msgspec.Struct | None = None
        self._spawned_by_name: tuple[NamedStep, ...] = ()
        self._refusal: BaseException | None = None
        self._send = send
        self._lock = threading.Lock()
        self._update = JobUpdate(0.0, "", checkpoint_json)
        self._resumed_from = checkpoint_json

    def __repr__(self) -> str:
        return f"<JobContext job {self.id} attempt {self.attempt}/{self.max_attempts} {self.queue}>"

    def progress(self, fraction: float, message: str = "") -> None:
        """Tell the worker how far the job has got (0.0 to 1.0); callable from any thread."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise TypeError(f"progress fraction must be a number, not {fraction!r}")
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"progress fraction must be between 0 and 1, not {fraction}")
        with self._lock:
            self._update = msgspec.structs.replace(
                self._update, fraction=float(fraction), message=str(message)[:MAX_MESSAGE_CHARS]
            )
            self._deliver()

    def checkpoint(self, value: Any) -> None:
        """Save ``value`` (JSON, at most 64 KiB) with the job, for a later attempt to resume from.

        It reaches the store under the job's lease, as progress does, and
        with the attempt's report at the latest: an attempt that crashes or
        fails after saving leaves it for the next one.
        """
        try:
            text = _ENCODER.encode(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a checkpoint must be JSON: {exc}") from exc
        if len(text) > MAX_CHECKPOINT_BYTES:
            raise ValueError(
                f"a checkpoint is at most {MAX_CHECKPOINT_BYTES} bytes of JSON, this is {len(text)}"
            )
        with self._lock:
            self._update = msgspec.structs.replace(self._update, checkpoint_json=text)
            self._deliver()

    def last_checkpoint(self, default: Any = None) -> Any:
        """What this job last saved with :meth:`checkpoint` (this attempt or an earlier one)."""
        with self._lock:
            text = self._update.checkpoint_json
        return default if text is None else json.loads(text)

    def parent_results(self) -> Iterator[Any]:
        """How each parent ended, in the order they were given: ``taskq.ParentResult`` records.

        ``position`` (from 0), ``job_id``, ``state``, and ``result`` (a
        parent that succeeded) or ``error``. Read lazily, one at a time, as
        the loop asks: a fan-in over ten thousand parents holds one result at
        a time unless it keeps them. Each call reads them again from the first.
        """
        return iter(()) if self._parents is None else self._parents()

    def spawn(self, flow: Spawnable | BareStep) -> None:
        """Add ``flow``'s jobs to this job's workflow, should this attempt succeed.

        Sized at run time: ``spawn(resize.map(found).then(build_index))``.
        The jobs go with the job's result, in the same write that records its
        success; an attempt that fails spawns nothing, and its retry spawns
        anew. Once per attempt (spawn a ``taskq.group`` of several flows);
        at most :data:`MAX_SPAWN_JOBS` jobs and :data:`MAX_SPAWN_BYTES` of JSON.
        An empty flow spawns nothing; a declared job given bare
        (``spawn(cleanup)``) is its step without arguments. Its steps by name
        are resolved by the worker as their workers declare them, before the
        spawn is written: a name no worker declares fails the attempt, and
        nothing is spawned. A spawn refused here (a second one, one over the
        bounds, a value that is not a flow) fails the job for good if it ends
        the job, as a flow refused when built does (:func:`refuse`).
        """
        if isinstance(flow, BareStep):
            flow = flow.step()
        if not isinstance(flow, Spawnable):
            raise self._refuse(TypeError(_not_spawnable(flow)))
        if not len(flow):
            return
        if len(flow) > MAX_SPAWN_JOBS:
            raise self._refuse(
                ValueError(f"a job spawns at most {MAX_SPAWN_JOBS} jobs, not {len(flow)}")
            )
        submission = flow.submission()
        by_name = tuple(
            NamedStep(position, call.where, tuple(call.options))
            for position, call in flow.by_name().items()
        )
        size = len(msgspec.json.encode(submission)) + len(msgspec.json.encode(by_name))
        if size > MAX_SPAWN_BYTES:
            raise self._refuse(
                ValueError(
                    f"a spawn is at most {MAX_SPAWN_BYTES} bytes of JSON, this is {size}: "
                    "pass paths or keys to the data, not the data"
                )
            )
        with self._lock:
            if self._spawned is not None:
                raise self._refuse(
                    RuntimeError(
                        "a job spawns once per attempt: spawn one taskq.group(...) of every flow"
                    )
                )
            self._spawned = submission
            self._spawned_by_name = by_name

    @property
    def spawned(self) -> msgspec.Struct | None:
        """What :meth:`spawn` was given, as a ``WorkflowSubmission``; None: nothing."""
        return self._spawned

    @property
    def spawned_by_name(self) -> tuple[NamedStep, ...]:
        """Which of the spawned jobs were given by name, for whoever writes them to resolve."""
        return self._spawned_by_name

    def refused(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the latest refusal of a flow this job built or spawned
        (:func:`refuse`): a job that fails with it would fail so on every attempt."""
        return exc is self._refusal

    def _refuse(self, exc: _E) -> _E:
        self._refusal = exc
        return exc

    def close(self) -> None:
        """Carry nothing more: the job is over (a thread it left behind may still call)."""
        with self._lock:
            self._send = None
            self._refusal = None  # it holds the frames of the job's traceback

    @property
    def resumed(self) -> bool:
        """Whether an earlier attempt left a checkpoint for this one."""
        return self._resumed_from is not None

    @property
    def update(self) -> JobUpdate:
        """The latest progress and checkpoint, as the runner reports them."""
        return self._update

    def _deliver(self) -> None:
        if self._send is not None:
            self._send(self._update)


def _not_spawnable(value: object) -> str:
    """The refusal of a spawn of ``value``, which is not a flow, with what was most likely meant."""
    said = (
        "spawn() takes a flow (resize.step(...), resize.map(...), taskq.group(...)) or a "
        f"declared job, not {shown(value)}"
    )
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        # A list or a generator of steps: once per attempt, so one group of them all.
        said += ": spawn several flows as one, spawn(taskq.group(*flows))"
    return said


_current: JobContext | None = None
# One job runs at a time in a process (a sandbox child, or the inline runner),
# and its threads must see it too: a module global, not a context variable.


def current_job() -> JobContext:
    """The job this code runs as; ``RuntimeError`` outside a job."""
    context = _current
    if context is None:
        # A plain call of a job that uses it lands here too: say how such a call is run.
        raise RuntimeError(
            "taskq.current_job() is only available inside a running job "
            "(run by a worker, or inline by taskq.testing); to call such a job here, "
            "as a test does, call it inside 'with taskq.testing.as_job():'"
        )
    return context


def shown(value: object) -> str:
    """``value`` as a refusal of a flow or a spawn names it: its repr cut short and its
    type, ``[<taskq job ...>, ...] (a list)``."""
    import reprlib  # Imported here, not with the module: only a refusal needs it

    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{reprlib.repr(value)} ({'an' if kind[:1] in 'aeiou' else 'a'} {kind})"


def refuse(exc: _E) -> _E:
    """``exc``, the refusal of a flow as built or spawned, noted on the job running here (if
    one is), for whoever runs it to fail it for good: the same code would build the same
    flow again, so another attempt would be refused the same way."""
    context = _current
    return exc if context is None else context._refuse(exc)


def enter(context: JobContext | None) -> None:
    """Make ``context`` the current job (None: no job); for whoever runs jobs."""
    global _current
    _current = context
