"""Group commit: concurrent submits of one client share one store write.

A store write costs about the same for one job as for a hundred: an fsync on
SQLite, a Raft round across an rqlite cluster (whose nodes spend their CPU
per request, not per job). So while one submit's write is in flight, later
submits of the same client (from other threads, or other tasks of an
:class:`~taskq.broker.client.client.AsyncClient`) wait, and when it returns they go
together, as one enqueue of all their jobs, each caller getting its own id.
A submit that finds nothing in flight writes at once, alone, as before.

Callers that submit again and again would, with that alone, settle into two
groups taking turns (one in flight, the other gathering the callers of the
write before): half the callers a write. So when a write of several callers
ends, the next group gathers a moment longer, until the callers of the write
just ended have come back (each caller has one submit at a time, so they are
counted), or a short while has passed: a fraction of what a write takes,
never more than :data:`MOST_GATHERING_SECONDS`. Eight such callers then share
each write, not four. A caller that wrote alone with no one waiting leaves
nothing to gather for: the next submit writes at once.

What each caller sees stays what it would see alone:

* every job is checked on its own before it joins a group, so a bad job is
  refused alone, with its own error, and nothing is written for it;
* a group refused for a reason of one of its jobs (an idempotency conflict,
  a submitter over its rate, a statement the store refused) wrote nothing:
  its jobs are then written one by one, so each caller gets its own outcome;
* a store failure (unavailable, outcome unknown) goes to every caller of the
  group, as it would have to each alone; the store's own resend of the
  group's write stays safe, as every job carries an idempotency key.

The coalescing is a plan (:mod:`taskq.broker.ops.plan`) with two more kinds of
step: :class:`Wait` for the turn of a group, and :class:`Shielded` for a
write other callers depend on, which cancelling the task that carries it
must not cut short. :func:`run` and :func:`run_async` carry those out; they
are the only code that knows whether callers block or await, and the
clients run every plan of theirs with them.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import anyio

from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.plan import Answer, Op, StoreStep
from taskq.broker.records import JobSpec
from taskq.broker.stores.store import Store
from taskq.broker.stores.trampoline import Pause, drive, drive_async

T = TypeVar("T")

MAX_GROUP = 256
"""The most jobs one shared write carries; later callers wait for the next one."""

GATHERING_SHARE = 0.5
"""How long the next group gathers, at most, as a share of what a write takes.

Gathering longer than a write would cost more than the callers who come back
save; half a write is still a gain with a caller or two slow to come back.
"""

MOST_GATHERING_SECONDS = 0.002
"""The longest the next group gathers, however slow the store's writes."""


class Signal(Protocol):
    """Wakes one waiting caller: a ``threading.Event`` for threads, an ``anyio.Event`` for tasks."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait until ``signal`` is set, or ``seconds`` have passed (None: no bound)."""

    signal: Any  # a threading.Event (blocking runner) or an anyio.Event (async runner)
    seconds: float | None = None


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

    __slots__ = ("outcome", "signal", "spec", "taken")

    def __init__(self, spec: JobSpec, signal: Signal) -> None:
        self.spec = spec
        self.signal = signal
        self.taken = False  # its job is in a group being written
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
        self._writing = False  # a write of this client's submits is under way
        self._waiting: list[_Member] = []
        # After a write of several callers, the next group gathers until ``_expected``
        # callers wait or until ``_gathered_by``; its first caller (``_head``) writes it.
        self._gathering = False
        self._expected = 0
        self._gathered_by = 0.0
        self._head: _Member | None = None
        self._write_seconds = 0.0  # what a write takes, a running average

    def submit(self, spec: JobSpec) -> GroupOp[int]:
        """The plan of one submit: alone at once, or in the next group (run it with :func:`run`)."""
        if self._claim():
            return (yield from self._write_alone(spec))
        self._check(spec)  # refused alone, with its own error, before it waits for anyone
        member = self._join(spec)
        if member is None:  # the write in flight ended meanwhile
            return (yield from self._write_alone(spec))
        while True:
            turn = self._turn(member)
            if isinstance(turn, list):
                yield from self._write_group(turn)
                break
            if member.outcome is not None:
                break
            try:
                yield Wait(member.signal, turn)
            except BaseException:
                self._leave(member)
                raise
        return member.result()

    def waiting(self) -> int:
        """How many submits wait for the write under way or gather for the next."""
        with self._lock:
            return len(self._waiting)

    # -- whose turn it is

    def _claim(self) -> bool:
        """Take the store for a write alone, if no write is under way or gathering."""
        with self._lock:
            if self._gathering and self._head is None and time.monotonic() >= self._gathered_by:
                self._gathering = False  # no one came back in time
            if self._writing or self._gathering:
                return False
            self._writing = True
            return True

    def _join(self, spec: JobSpec) -> _Member | None:
        member = _Member(spec, self._new_signal())
        with self._lock:
            if not (self._writing or self._gathering):
                self._writing = True
                return None
            self._waiting.append(member)
            if not self._gathering:
                return member  # waits for the write under way to end
            if self._head is None:
                self._head = member  # gathers the group, then writes it
                return member
            if len(self._waiting) < self._expected:
                return member
            signal = self._head.signal
        signal.set()  # everyone expected is here: the head need not wait longer
        return member

    def _turn(self, member: _Member) -> list[_Member] | float | None:
        """What ``member`` does next: write this group, or wait (at most so many seconds).

        A head whose group is complete, or whose gathering time is up, takes
        its group (itself first); any other caller waits for its outcome, or
        to become a head.
        """
        with self._lock:
            if member.signal.is_set():
                member.signal = self._new_signal()
            if member is not self._head:
                return None
            wait = self._gathered_by - time.monotonic()
            count = len(self._waiting)
            if wait > 0 and count < min(self._expected, MAX_GROUP):
                return wait
            group = self._waiting[:MAX_GROUP]
            del self._waiting[:MAX_GROUP]
            for taken in group:
                taken.taken = True
            self._head = None
            self._gathering = False
            self._writing = True
            return group

    def _hand_over(self, callers: int, seconds: float) -> None:
        """A write of ``callers`` ended after ``seconds``: the next group gathers.

        Its callers are those waiting, and the ``callers`` of this write, who
        may come back at once. A caller alone, with no one waiting, leaves the
        store free.
        """
        with self._lock:
            self._writing = False
            self._write_seconds += (seconds - self._write_seconds) / 4
            if callers <= 1 and not self._waiting:
                return
            self._gathering = True
            self._expected = callers + len(self._waiting)
            self._gathered_by = time.monotonic() + min(
                GATHERING_SHARE * self._write_seconds, MOST_GATHERING_SECONDS
            )
            self._head = self._waiting[0] if self._waiting else None
            signal = self._head.signal if self._head is not None else None
        if signal is not None:
            signal.set()

    def _leave(self, member: _Member) -> None:
        """A waiting caller was cancelled (or interrupted): its job is not written by anyone.

        Unless its group's write has begun: then it is as a lone submit
        cancelled mid-request, and its job may be written.
        """
        with self._lock:
            if member.taken:
                return  # a member of a group another caller is writing
            self._waiting.remove(member)
            if member is not self._head:
                return
            # The next caller gathers instead; with none, the next to come does.
            self._head = self._waiting[0] if self._waiting else None
            signal = self._head.signal if self._head is not None else None
        if signal is not None:
            signal.set()

    # -- writing

    def _write_alone(self, spec: JobSpec) -> GroupOp[int]:
        began = time.monotonic()
        try:
            [job_id] = yield from self._enqueue([spec])
        finally:
            self._hand_over(1, time.monotonic() - began)
        return job_id

    def _write_group(self, group: list[_Member]) -> GroupOp[None]:
        """Write ``group``'s jobs in one enqueue, or one by one if a job of it is refused."""
        outcomes: list[int | BaseException] = []
        began = time.monotonic()
        try:
            try:
                ids = yield from _shielded(self._enqueue([member.spec for member in group]))
                outcomes = list(ids)
            except Exception as exc:
                if len(group) > 1 and _refusal(exc):  # a group of one: the refusal is its own
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
            with self._lock:
                for member, outcome in zip(group, outcomes, strict=True):
                    member.outcome = outcome
                signals = [member.signal for member in group[1:]]  # the first is writing
            self._hand_over(len(group), time.monotonic() - began)
            for signal in signals:
                signal.set()

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
            step.signal.wait(step.seconds)
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
            with anyio.move_on_after(step.seconds):
                await step.signal.wait()
            return None
        if not isinstance(step, Shielded):
            assert not isinstance(step, Pause)
            return await plan.carry_out_async(store, step)
        with anyio.CancelScope(shield=True):
            answer = await plan.carry_out_async(store, step.step)
        return answer

    return await drive_async(op, carry_out, thrown=BaseException)
