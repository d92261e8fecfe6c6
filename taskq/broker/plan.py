"""Operations as plans: written once, run by a blocking or an async runner.

An operation is a generator that yields what it needs from the store (a
:class:`Write` batch, a :class:`Read`, or a :class:`Sleep`) and receives the
answer; a store error is thrown back into it at that ``yield``, so it can
resolve an unknown outcome with a read. :func:`run` and :func:`run_async`
are the only code that knows whether the caller blocks or awaits.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import anyio

from taskq import errors
from taskq.broker.store import Consistency, Row, Statement, StatementResult, Store

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Write:
    """An atomic batch; ``idempotent`` lets a replicated store resend it."""

    statements: Sequence[Statement]
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class Read:
    """One read at a consistency."""

    statement: Statement
    consistency: Consistency = Consistency.WEAK


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait before the next step (polling for a result)."""

    seconds: float


Step: TypeAlias = Write | Read | Sleep
Answer: TypeAlias = list[StatementResult] | list[Row] | None
Op: TypeAlias = Generator[Step, Any, T]


def run(store: Store, op: Op[T]) -> T:
    """Carry out ``op`` against ``store``, blocking."""
    try:
        step = next(op)
        while True:
            try:
                answer: Answer
                if isinstance(step, Write):
                    answer = store.execute(step.statements, idempotent=step.idempotent)
                elif isinstance(step, Read):
                    answer = store.query(step.statement, consistency=step.consistency)
                else:
                    time.sleep(step.seconds)
                    answer = None
            except errors.StoreError as exc:
                step = op.throw(exc)
            else:
                step = op.send(answer)
    except StopIteration as done:
        value: T = done.value
        return value


async def run_async(store: Store, op: Op[T]) -> T:
    """Carry out ``op`` against ``store`` from async code."""
    try:
        step = next(op)
        while True:
            try:
                answer: Answer
                if isinstance(step, Write):
                    answer = await store.execute_async(step.statements, idempotent=step.idempotent)
                elif isinstance(step, Read):
                    answer = await store.query_async(step.statement, consistency=step.consistency)
                else:
                    await anyio.sleep(step.seconds)
                    answer = None
            except errors.StoreError as exc:
                step = op.throw(exc)
            else:
                step = op.send(answer)
    except StopIteration as done:
        value: T = done.value
        return value
