"""Store operations as plans: written once, run by a blocking or an async runner.

An operation is a generator that yields what it needs from the store (a
:class:`Write` batch, a :class:`Read`, or a :class:`Pause`) and receives the
answer; a store error is thrown back into it at that ``yield``, so it can
resolve an unknown outcome with a read. :func:`run` and :func:`run_async`
hand it to the one trampoline (:mod:`taskq.broker.stores.trampoline`).
"""

from __future__ import annotations

import functools
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import anyio.to_thread
import msgspec

from taskq import errors
from taskq.broker.stores.store import Consistency, Row, Statement, StatementResult, Store
from taskq.broker.stores.trampoline import Pause, drive, drive_async

if TYPE_CHECKING:
    from taskq.broker.stores.sqlite_store import SqliteStore

T = TypeVar("T")


class Write(msgspec.Struct, frozen=True):
    """An atomic batch; ``idempotent`` lets a replicated store resend it."""

    statements: Sequence[Statement]
    idempotent: bool = False


class Read(msgspec.Struct, frozen=True):
    """One read at a consistency."""

    statement: Statement
    consistency: Consistency = Consistency.WEAK


StoreStep: TypeAlias = Write | Read
Answer: TypeAlias = list[StatementResult] | list[Row]
Op: TypeAlias = Generator[StoreStep | Pause, Any, T]


def carry_out(store: Store, step: StoreStep) -> Answer:
    """Ask ``store`` for one step of a plan, blocking."""
    if isinstance(step, Write):
        return store.execute(step.statements, idempotent=step.idempotent)
    return store.query(step.statement, consistency=step.consistency)


async def carry_out_async(store: Store, step: StoreStep) -> Answer:
    """Ask ``store`` for one step of a plan, from async code."""
    if isinstance(step, Write):
        return await store.execute_async(step.statements, idempotent=step.idempotent)
    return await store.query_async(step.statement, consistency=step.consistency)


def run(store: Store, op: Op[T]) -> T:
    """Carry out ``op`` against ``store``, blocking."""
    return drive(op, functools.partial(carry_out, store), thrown=errors.StoreError)


async def run_async(store: Store, op: Op[T]) -> T:
    """Carry out ``op`` against ``store`` from async code."""
    return await drive_async(
        op, functools.partial(carry_out_async, store), thrown=errors.StoreError
    )


async def run_in_thread(store: Store, op: Op[T]) -> T:
    """Carry out ``op`` blocking, in a worker thread: one trip there for all its steps.

    For a short plan on the embedded store, whose async calls are each such a
    trip: :func:`run_async` makes one per step. Once started, the plan runs to
    its end before a cancellation is seen.
    """
    return await anyio.to_thread.run_sync(run, store, op)


async def run_here_unless_waiting(store: SqliteStore, op: Op[T]) -> T:
    """Carry out ``op`` on the caller's thread, each step that would wait for a lock in a
    worker thread instead.

    For a caller whose thread has nothing else to do meanwhile (an idle
    worker's event loop): the trip to a thread and back is two thread
    switches, and a statement that waits for another's write lock is left to
    a thread, so the caller never waits for one. The commit's fsync does
    block the caller.
    """

    async def carry_out_here(step: StoreStep) -> Answer:
        if isinstance(step, Write):
            answer: Answer | None = store.execute_if_free(step.statements)
        else:
            answer = store.query_if_free(step.statement)
        if answer is None:
            answer = await carry_out_async(store, step)
        return answer

    return await drive_async(op, carry_out_here, thrown=errors.StoreError)
