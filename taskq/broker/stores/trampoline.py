"""Running a plan: a generator that yields the steps it needs and is sent their answers.

Three kinds of plan share this: a store operation (:mod:`taskq.broker.ops.plan`)
yields batches and reads, a replicated store's request
(:mod:`taskq.broker.stores.http_plan`) yields HTTP calls to its nodes, and a
request of the HTTP client (:mod:`taskq.broker.client.http_answers`) yields
HTTP requests to ``taskq serve``. Any may yield a :class:`Pause`. :func:`drive`
and :func:`drive_async` are the only code that knows whether the caller
blocks or awaits; what a step means is the ``carry_out`` function each kind
of plan passes in.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

import anyio
import msgspec

StepT = TypeVar("StepT")
AnswerT = TypeVar("AnswerT")
T = TypeVar("T")


class Pause(msgspec.Struct, frozen=True):
    """Wait before the next step (polling for a result, backing off between tries)."""

    seconds: float


def drive(
    plan: Generator[Any, Any, T],
    carry_out: Callable[[StepT], AnswerT],
    *,
    thrown: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> T:
    """Run ``plan`` to its return value, blocking.

    ``plan`` yields a :class:`Pause` or a step for ``carry_out``, whose
    answer is sent back in.

    An exception of a ``thrown`` type raised by ``carry_out`` is thrown into
    the plan at its ``yield``, so it can resolve what it can (an unknown
    outcome, say) with another step.
    """
    try:
        step = next(plan)
        while True:
            answer: AnswerT | None
            try:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    answer = None
                else:
                    answer = carry_out(step)
            except thrown as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


async def drive_async(
    plan: Generator[Any, Any, T],
    carry_out: Callable[[StepT], Awaitable[AnswerT]],
    *,
    thrown: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> T:
    """Run ``plan`` to its return value in an anyio task; see :func:`drive`."""
    try:
        step = next(plan)
        while True:
            answer: AnswerT | None
            try:
                if isinstance(step, Pause):
                    await anyio.sleep(step.seconds)
                    answer = None
                else:
                    answer = await carry_out(step)
            except thrown as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result
