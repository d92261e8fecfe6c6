"""The two faces of a client: how a request declared once reads on each.

A :class:`Blocking` client (:class:`taskq.broker.client.client.Client`)
runs a request's plan and returns its answer; an :class:`Awaiting` one
(:class:`taskq.broker.client.client.AsyncClient`) awaits it. A request is
declared once, as the method that builds its plan: :class:`Operation` for
one answer, :class:`Paged` for answers that come page after page (an
iterator on one face, an async iterator on the other).
"""

from __future__ import annotations

import functools
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

import anyio

from taskq.broker.client import group_commit
from taskq.broker.client.client_base import ClientBase
from taskq.broker.client.group_commit import GroupOp, Signal

T = TypeVar("T")
P = ParamSpec("P")


class Blocking(ClientBase):
    """A client whose callers block until each request is answered."""

    def _run(self, op: GroupOp[T]) -> T:
        return group_commit.run(self.store, op)


class Awaiting(ClientBase):
    """A client whose callers await each request's answer."""

    async def _run(self, op: GroupOp[T]) -> T:
        return await group_commit.run_async(self.store, op)

    def _new_signal(self) -> Signal:
        return anyio.Event()


class Operation(Generic[P, T]):
    """A request declared once, by the method that builds its plan.

    On a :class:`Blocking` client it reads as a method returning the plan's
    answer, on an :class:`Awaiting` one as a coroutine method; each keeps the
    declaration's name, parameters and docstring.
    """

    def __init__(self, plan: Callable[Concatenate[Any, P], GroupOp[T]]) -> None:
        self.plan = plan
        self.__doc__ = plan.__doc__

        @functools.wraps(plan)
        def blocking(client: Blocking, /, *args: Any, **kwargs: Any) -> Any:
            return client._run(plan(client, *args, **kwargs))

        @functools.wraps(plan)
        async def awaiting(client: Awaiting, /, *args: Any, **kwargs: Any) -> Any:
            return await client._run(plan(client, *args, **kwargs))

        self._blocking = blocking
        self._awaiting = awaiting

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, client: Awaiting, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, client: ClientBase | None, owner: type[Any]) -> Any:
        if client is None:
            return self
        if isinstance(client, Awaiting):
            return types.MethodType(self._awaiting, client)
        return types.MethodType(self._blocking, client)


class Pages(Protocol[T]):
    """Answers that come page after page: the plan of each next one, until there are none."""

    def next_page(self) -> GroupOp[list[T]] | None: ...


class Paged(Generic[P, T]):
    """A request declared once whose answers come page after page (see :class:`Pages`).

    On a :class:`Blocking` client it reads as a method returning an iterator
    of the answers, on an :class:`Awaiting` one as a method returning an
    async iterator; each runs one page's plan at a time, as the caller asks
    for more. The declaration's checks of its arguments run at the call.
    """

    def __init__(self, pages: Callable[Concatenate[Any, P], Pages[T]]) -> None:
        self.pages = pages
        self.__doc__ = pages.__doc__

        @functools.wraps(pages)
        def blocking(client: Blocking, /, *args: Any, **kwargs: Any) -> Iterator[T]:
            return _blocking_answers(client, pages(client, *args, **kwargs))

        @functools.wraps(pages)
        def awaiting(client: Awaiting, /, *args: Any, **kwargs: Any) -> AsyncIterator[T]:
            return _awaiting_answers(client, pages(client, *args, **kwargs))

        self._blocking = blocking
        self._awaiting = awaiting

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, client: Awaiting, owner: type[Any]) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: ClientBase | None, owner: type[Any]) -> Any:
        if client is None:
            return self
        if isinstance(client, Awaiting):
            return types.MethodType(self._awaiting, client)
        return types.MethodType(self._blocking, client)


def _blocking_answers(client: Blocking, pages: Pages[T]) -> Iterator[T]:
    while (page := pages.next_page()) is not None:
        yield from client._run(page)


async def _awaiting_answers(client: Awaiting, pages: Pages[T]) -> AsyncIterator[T]:
    while (page := pages.next_page()) is not None:
        for answer in await client._run(page):
            yield answer
