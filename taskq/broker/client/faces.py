"""The two faces of a client: how a request declared once reads on each.

A :class:`Blocking` client (:class:`taskq.broker.client.client.Client`)
runs a request's plan and returns its answer; an :class:`Awaiting` one
(:class:`taskq.broker.client.client.AsyncClient`) awaits it. A request is
declared once, as the method that builds its plan: :class:`Operation` for
one answer, :class:`Paged` for answers that come page after page (an
iterator on one face, an async iterator on the other). A client over
``taskq serve`` (an http(s):// URL) runs instead the request's HTTP plan,
declared beside it with :func:`over_http` (:mod:`.http_plans`); a request
without one raises :class:`taskq.errors.NotOverHttp` there.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    get_args,
    get_origin,
    overload,
)

import anyio

from taskq import errors
from taskq.broker.client import group_commit
from taskq.broker.client.client_base import ClientBase, Plan
from taskq.broker.client.group_commit import GroupOp, Signal
from taskq.broker.client.http_requests import HttpPlan, Streamed

T = TypeVar("T")
P = ParamSpec("P")


class Blocking(ClientBase):
    """A client whose callers block until each request is answered."""

    def _run(self, op: Plan[T]) -> T:
        # The casts name their types as text: subscripting a generic alias at run time
        # costs a few microseconds, on every request.
        if self.http is not None:
            return self.http.run(cast("HttpPlan[T]", op))
        return group_commit.run(self.store, cast("GroupOp[T]", op))


class Awaiting(ClientBase):
    """A client whose callers await each request's answer."""

    async def _run(self, op: Plan[T]) -> T:
        if self.http is not None:
            return await self.http.run_async(cast("HttpPlan[T]", op))
        return await group_commit.run_async(self.store, cast("GroupOp[T]", op))

    def _new_signal(self) -> Signal:
        return anyio.Event()


class Operation(Generic[P, T]):
    """A request declared once, by the method that builds its plan.

    On a :class:`Blocking` client it reads as a method returning the plan's
    answer, on an :class:`Awaiting` one as a coroutine method; each keeps the
    declaration's name, parameters and docstring.
    """

    def __init__(
        self,
        plan: Callable[Concatenate[Any, P], GroupOp[T]],
        http: Callable[P, HttpPlan[T]] | None = None,
    ) -> None:
        self.plan = plan
        self.http = http
        self.__doc__ = plan.__doc__

        @functools.wraps(plan)
        def blocking(client: Blocking, /, *args: Any, **kwargs: Any) -> Any:
            return client._run(self._plan_for(client, args, kwargs))

        @functools.wraps(plan)
        async def awaiting(client: Awaiting, /, *args: Any, **kwargs: Any) -> Any:
            return await client._run(self._plan_for(client, args, kwargs))

        # Both faces answer alike: one signature, read once (every client's import
        # reads those of all its requests).
        signature = inspect.signature(plan).replace(return_annotation=_answer_of(plan))
        for method in (blocking, awaiting):
            cast(Any, method).__signature__ = signature
        self._blocking = blocking
        self._awaiting = awaiting

    def _plan_for(self, client: ClientBase, args: Any, kwargs: Any) -> Plan[T]:
        """The plan of this request on ``client``'s store, or over its HTTP."""
        if client.http is None:
            return self.plan(client, *args, **kwargs)
        if self.http is None:
            raise errors.NotOverHttp(
                f"{self.plan.__name__}() needs the store: taskq serve has no endpoint for it"
            )
        return self.http(*args, **kwargs)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, client: Awaiting, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, client: ClientBase | None, owner: type[Any]) -> Any:
        if client is None:
            return _unbound(self, self._blocking, self._awaiting, owner)
        if isinstance(client, Awaiting):
            return types.MethodType(self._awaiting, client)
        return types.MethodType(self._blocking, client)


def over_http(
    http: Callable[P, HttpPlan[T]],
) -> Callable[[Callable[Concatenate[Any, P], GroupOp[T]]], Operation[P, T]]:
    """Declare a request (as :class:`Operation` does) with ``http``, the plan of the same
    request over ``taskq serve``: the same parameters, the same answer."""

    def declare(plan: Callable[Concatenate[Any, P], GroupOp[T]]) -> Operation[P, T]:
        return Operation(plan, http)

    return declare


class Pages(Protocol[T]):
    """Answers that come page after page: the plan of each next one, until there are none."""

    def next_page(self) -> GroupOp[list[T]] | None: ...


class Paged(Generic[P, T]):
    """A request declared once whose answers come page after page (see :class:`Pages`).

    On a :class:`Blocking` client it reads as a method returning an iterator
    of the answers, on an :class:`Awaiting` one as a method returning an
    async iterator; each runs one page's plan at a time, as the caller asks
    for more. The declaration's checks of its arguments run at the call.
    Over HTTP it reads the answers of ``http`` (a :class:`Streamed` request)
    as they come; a request without one raises :class:`taskq.errors.NotOverHttp`.
    """

    def __init__(
        self,
        pages: Callable[Concatenate[Any, P], Pages[T]],
        http: Callable[P, Streamed[T]] | None = None,
    ) -> None:
        self.pages = pages
        self.http = http
        self.__doc__ = pages.__doc__

        @functools.wraps(pages)
        def blocking(client: Blocking, /, *args: Any, **kwargs: Any) -> Iterator[T]:
            if client.http is not None:
                return client.http.stream(self._streamed(args, kwargs))
            return _blocking_answers(client, pages(client, *args, **kwargs))

        @functools.wraps(pages)
        def awaiting(client: Awaiting, /, *args: Any, **kwargs: Any) -> AsyncIterator[T]:
            if client.http is not None:
                return client.http.stream_async(self._streamed(args, kwargs))
            return _awaiting_answers(client, pages(client, *args, **kwargs))

        declared = inspect.signature(pages)  # read once for both faces, as above
        _answering(blocking, declared, _iterator_of(pages, "Iterator", Iterator))
        _answering(awaiting, declared, _iterator_of(pages, "AsyncIterator", AsyncIterator))
        self._blocking = blocking
        self._awaiting = awaiting

    def _streamed(self, args: Any, kwargs: Any) -> Streamed[T]:
        if self.http is None:
            raise errors.NotOverHttp(
                f"{self.pages.__name__}() needs the store: taskq serve has no endpoint for it"
            )
        return self.http(*args, **kwargs)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, client: Awaiting, owner: type[Any]) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: ClientBase | None, owner: type[Any]) -> Any:
        if client is None:
            return _unbound(self, self._blocking, self._awaiting, owner)
        if isinstance(client, Awaiting):
            return types.MethodType(self._awaiting, client)
        return types.MethodType(self._blocking, client)


def paged_over_http(
    http: Callable[P, Streamed[T]],
) -> Callable[[Callable[Concatenate[Any, P], Pages[T]]], Paged[P, T]]:
    """Declare a paged request (as :class:`Paged` does) with ``http``, the same request over
    ``taskq serve``: the same parameters, the same answers."""

    def declare(pages: Callable[Concatenate[Any, P], Pages[T]]) -> Paged[P, T]:
        return Paged(pages, http)

    return declare


def _blocking_answers(client: Blocking, pages: Pages[T]) -> Iterator[T]:
    while (page := pages.next_page()) is not None:
        yield from client._run(page)


async def _awaiting_answers(client: Awaiting, pages: Pages[T]) -> AsyncIterator[T]:
    while (page := pages.next_page()) is not None:
        for answer in await client._run(page):
            yield answer


def _unbound(
    declared: object, blocking: Callable[..., Any], awaiting: Callable[..., Any], owner: type[Any]
) -> Any:
    """A request read from a client's class (``help(taskq.Client.prune)``, pydoc, an IDE):
    the method of that client's kind, with the declaration's name, signature and doc, not
    the descriptor that makes it; from a class of neither kind, the declaration itself."""
    if issubclass(owner, Awaiting):
        return awaiting
    if issubclass(owner, Blocking):
        return blocking
    return declared


# A request's declaration returns its plan, ``GroupOp[Job]`` or ``Pages[OutputEvent]``;
# its methods return the answer, which is what help() and an IDE must show. The
# declarations' annotations are text (``from __future__ import annotations``), read as
# text here: resolving them would need every name of the declaring module at import.
_GROUP_OP = re.compile(r"GroupOp\[(?P<answer>.*)\]")
_PAGES = re.compile(r"Pages\[(?P<answer>.*)\]")


def _inner(annotation: object, text: re.Pattern[str], origin: object, at: int) -> object:
    """The answer type inside a plan's ``annotation``, as text if it is text; None if the
    annotation is not of that plan's form."""
    if isinstance(annotation, str):
        found = text.fullmatch(annotation.strip())
        # ``builtins.list`` is spelt so beside a method named list; shown, it is a list.
        return found and re.sub(r"\bbuiltins\.", "", found["answer"])
    if get_origin(annotation) is origin and get_args(annotation):
        return get_args(annotation)[at]
    return None


def _answer_of(plan: Callable[..., Any]) -> object:
    """What running ``plan`` answers; no annotation if its return is not a ``GroupOp``."""
    answer = _inner(plan.__annotations__.get("return"), _GROUP_OP, Generator, -1)
    return inspect.Signature.empty if answer is None else answer


def _iterator_of(pages: Callable[..., Any], name: str, iterator: Any) -> object:
    """The iterator (``name``, ``iterator``) of the answers of ``pages`` (declared
    ``-> Pages[T]``): ``Iterator[T]``, or a bare ``Iterator`` if T is unsaid."""
    answers = _inner(pages.__annotations__.get("return"), _PAGES, Pages, 0)
    if answers is None:
        return iterator
    return f"{name}[{answers}]" if isinstance(answers, str) else iterator[answers]


def _answering(method: Callable[..., Any], declared: inspect.Signature, answer: object) -> None:
    """Give ``method`` the ``declared`` signature with ``answer`` as what it returns."""
    cast(Any, method).__signature__ = declared.replace(return_annotation=answer)
