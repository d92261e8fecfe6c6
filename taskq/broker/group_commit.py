"""Group commit: concurrent submits of one client share one store write.

A store write costs about the same for one job as for a hundred: an fsync on
SQLite, a Raft round across an rqlite cluster. So while one submit's write
is in flight, later submits of the same client (from other threads, or other
tasks of an :class:`~taskq.broker.client.AsyncClient`) wait, and when it
returns they go together, as one enqueue of all their jobs, each caller
getting its own id. No timer, and no added wait for a lone submitter: a
submit that finds no write in flight writes at once, alone, as before.

One write at a time, so callers that submit again and again settle into two
groups taking turns (one in flight, one gathering): 8 such callers need a
quarter of the writes they would alone. A second write in flight would let
three groups turn, but on a 2-core machine running a 3-node cluster the
smaller groups cost more (more writes per job) than the overlap saved.

What each caller sees stays what it would see alone:

* every job is checked on its own before it joins a group, so a bad job is
  refused alone, with its own error, and nothing is written for it;
* a group refused for a reason of one of its jobs (an idempotency conflict,
  a submitter over its rate, a statement the store refused) wrote nothing:
  its jobs are then written one by one, so each caller gets its own outcome;
* a store failure (unavailable, outcome unknown) goes to every caller of the
  group, as it would have to each alone; the store's own resend of the
  group's write stays safe, as every job carries an idempotency key.

The coalescing is a plan (:mod:`taskq.broker.plan`) with two more kinds of
step: :class:`Wait` for the turn of a group, and :class:`Shielded` for a
write other callers depend on, which cancelling the task that carries it
must not cut short. :func:`run` and :func:`run_async` carry those out; they
are the only code that knows whether callers block or await, and the
clients run every plan of theirs with them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import anyio

from taskq import errors
from taskq.broker import plan
from taskq.broker.plan import Answer, Op, StoreStep
from taskq.broker.records import JobSpec
from taskq.broker.store import Store
from taskq.broker.trampoline import Pause, drive, drive_async

T = TypeVar("T")

MAX_GROUP = 256
"""The most jobs one shared write carries; later callers wait for the next one."""


class Signal(Protocol):
    """Wakes one waiting caller: a ``threading.Event`` for threads, an ``anyio.Event`` for tasks."""

    def set(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait until ``signal`` is set: another caller's write has ended."""

    signal: Any  # a threading.Event (blocking runner) or an anyio.Event (async runner)


@dataclass(frozen=True, slots=True)
class Shielded:
    """A store step that other callers wait on: cancelling this task must not cut it short."""

    step: StoreStep


GroupStep: TypeAlias = StoreStep | Wait | Shielded | Pause
GroupOp: TypeAlias = Generator[GroupStep, Any, T]
"""A plan that may also wait for a group's turn, or write for a group: see :func:`run`."""
Enqueue: TypeAlias = Callable[[Sequence[JobSpec]], Op[list[int]]]


class _Member:
    """One caller waiting in a group: its job, its signal, and what came of it."""

    __slots__ = ("group", "outcome", "signal", "spec")

    def __init__(self, spec: JobSpec, signal: Signal) -> None:
        self.spec = spec
        self.signal = signal
        # Set when this caller is to write the group it heads (itself included).
        self.group: list[_Member] | None = None
        self.outcome: int | BaseException | None = None

    def result(self) -> int:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        assert self.outcome is not None
        return self.outcome


class GroupCommit:
    """Coalesces the concurrent single submits of one client into shared writes.

    ``enqueue`` builds the enqueue of several jobs (all or none, ids in
    order); ``check`` raises :class:`taskq.errors.InvalidJob` for a job the
    enqueue would refuse; ``new_signal`` makes what a waiting caller blocks
    or awaits on.
    """

    def __init__(
        self, enqueue: Enqueue, check: Callable[[JobSpec], None], new_signal: Callable[[], Signal]
    ) -> None:
        self._enqueue = enqueue
        self._check = check
        self._new_signal = new_signal
        # Threads of a Client share this; an AsyncClient's tasks never hold it across an await.
        self._lock = threading.Lock()
        self._busy = False  # a write of this client's submits is under way
        self._waiting: list[_Member] = []

    def submit(self, spec: JobSpec) -> GroupOp[int]:
        """The plan of one submit: alone at once, or in the next group (run it with :func:`run`)."""
        if self._claim():
            return (yield from self._write_alone(spec))
        self._check(spec)  # refused alone, with its own error, before it waits for anyone
        member = self._join(spec)
        if member is None:  # the write in flight ended meanwhile
            return (yield from self._write_alone(spec))
        try:
            yield Wait(member.signal)
        except BaseException:
            self._leave(member)
            raise
        if member.group is not None:
            yield from self._write_group(member.group)
        return member.result()

    def waiting(self) -> int:
        """How many submits wait for the write under way."""
        with self._lock:
            return len(self._waiting)

    # -- whose turn it is

    def _claim(self) -> bool:
        with self._lock:
            if self._busy:
                return False
            self._busy = True
            return True

    def _join(self, spec: JobSpec) -> _Member | None:
        member = _Member(spec, self._new_signal())
        with self._lock:
            if not self._busy:
                self._busy = True
                return None
            self._waiting.append(member)
            return member

    def _hand_over(self) -> None:
        """A write ended: the callers waiting meanwhile go next, headed by the first of them."""
        with self._lock:
            group = self._waiting[:MAX_GROUP]
            del self._waiting[:MAX_GROUP]
            if not group:
                self._busy = False
                return
            group[0].group = group
        group[0].signal.set()

    def _leave(self, member: _Member) -> None:
        """A waiting caller was cancelled (or interrupted): its job is not written by anyone.

        Unless its group's write has begun: then it is as a lone submit
        cancelled mid-request, and its job may be written.
        """
        with self._lock:
            if member in self._waiting:
                self._waiting.remove(member)
                return
            group = member.group
            if group is None:
                return  # a member of a group another caller is writing
            member.group = None
            rest = [other for other in group if other is not member]
            if rest:
                rest[0].group = rest
        if rest:
            rest[0].signal.set()
        else:
            self._hand_over()

    # -- writing

    def _write_alone(self, spec: JobSpec) -> GroupOp[int]:
        try:
            [job_id] = yield from self._enqueue([spec])
        finally:
            self._hand_over()
        return job_id

    def _write_group(self, group: list[_Member]) -> GroupOp[None]:
        """Write ``group``'s jobs in one enqueue, or one by one if a job of it is refused."""
        outcomes: list[int | BaseException] = []
        try:
            try:
                ids = yield from _shielded(self._enqueue([member.spec for member in group]))
                outcomes = list(ids)
            except Exception as exc:
                if _refusal(exc):
                    for member in group:
                        outcomes.append((yield from self._write_one(member.spec)))
                else:
                    outcomes = [_own_copy(exc) for _ in group]  # as each would have met it
        except BaseException as exc:
            # Interrupted mid-write (a thread's KeyboardInterrupt): whether it landed is unknown.
            unknown = errors.OutcomeUnknown(
                "the write of this job, shared with other submits of the client, was "
                f"interrupted ({type(exc).__name__}); it may or may not have been applied"
            )
            outcomes += [_own_copy(unknown) for _ in group[len(outcomes) :]]
            raise
        finally:
            self._hand_over()
            for member, outcome in zip(group, outcomes, strict=True):
                member.outcome = outcome
            for member in group[1:]:
                member.signal.set()

    def _write_one(self, spec: JobSpec) -> GroupOp[int | BaseException]:
        try:
            [job_id] = yield from _shielded(self._enqueue([spec]))
        except Exception as exc:
            return exc
        return job_id


def _refusal(exc: Exception) -> bool:
    """Whether ``exc`` refused the request for what a job of it holds, having written nothing.

    A failure of the store (unavailable, outcome unknown) is not: every job
    would meet it alone. Nor is an error outside taskq's, which says nothing
    of what was written.
    """
    if isinstance(exc, errors.StoreError):
        return isinstance(exc, errors.StatementError)  # the batch was rolled back whole
    return isinstance(exc, errors.TaskqError)


def _own_copy(exc: BaseException) -> BaseException:
    # Each caller raises an error of its own: one object raised in several threads at once
    # would gather all of their tracebacks.
    try:
        return copy.copy(exc)
    except Exception:
        return exc


def _shielded(op: Op[T]) -> GroupOp[T]:
    """``op`` with each of its store steps marked :class:`Shielded`."""
    answer: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            step = op.throw(thrown) if thrown is not None else op.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result
        thrown = None
        try:
            answer = yield (step if isinstance(step, Pause) else Shielded(step))
        except BaseException as exc:
            thrown = exc


def run(store: Store, op: GroupOp[T]) -> T:
    """Carry out a client's plan, a submit's included, blocking (``threading.Event`` signals)."""

    def carry_out(step: GroupStep) -> Answer | None:
        if isinstance(step, Wait):
            step.signal.wait()
            return None
        if isinstance(step, Shielded):
            return plan.carry_out(store, step.step)
        assert not isinstance(step, Pause)  # drive sleeps those itself
        return plan.carry_out(store, step)

    # Everything is thrown into the plan, so that a caller interrupted while it
    # waits or writes for a group can hand its group on.
    return drive(op, carry_out, thrown=BaseException)


async def run_async(store: Store, op: GroupOp[T]) -> T:
    """Carry out a client's plan, a submit's included, in a task (``anyio.Event`` signals)."""

    async def carry_out(step: GroupStep) -> Answer | None:
        if isinstance(step, Wait):
            await step.signal.wait()
            return None
        if not isinstance(step, Shielded):
            assert not isinstance(step, Pause)
            return await plan.carry_out_async(store, step)
        with anyio.CancelScope(shield=True):
            answer = await plan.carry_out_async(store, step.step)
        return answer

    return await drive_async(op, carry_out, thrown=BaseException)
