"""Carrying a client's requests to ``taskq serve`` over HTTP: one keep-alive connection pool.

A request of the HTTP client is a plan as a store's is (:mod:`.http_plans`):
a generator that yields each :class:`HttpRequest` it needs and is sent the
answer. :class:`HttpTransport` runs it, blocking (``httpx.Client``) or
awaited (``httpx.AsyncClient``), one of each at most per taskq client. An
answer that is a problem (RFC 9457) raises the taskq error it names
(:mod:`.problem_types`); a 503, or a server not reached, is asked again after
its ``Retry-After`` for as long as the call's time allows (nothing was
applied), then raised.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeAlias, TypeVar

import anyio
import httpx
import msgspec

from taskq import errors
from taskq.broker.client.http_stream import EVENT_STREAM, EventLines, ServerEvent
from taskq.broker.client.problem_types import Problem, error_of

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

HTTP_SCHEMES = ("http://", "https://")
TOKEN_ENV = "TASKQ_TOKEN"
LONG_POLL_SECONDS = 60.0
"""The longest the server holds a request open (a job waited for): under proxies' idle timeouts."""
# How long a server not reached is left before it is asked again (no Retry-After to go by).
_UNREACHED_RETRY_SECONDS = 0.5


class HttpRequest(NamedTuple):
    """One request of a plan: ``body`` is JSON already encoded; ``wait`` the seconds the
    server may hold it (a long poll) or stay quiet (a stream), which its read timeout allows for."""

    method: str
    path: str
    params: Mapping[str, str | int | float] | None = None
    body: bytes | None = None
    wait: float = 0.0
    headers: Mapping[str, str] | None = None


HttpPlan: TypeAlias = Generator[HttpRequest, httpx.Response, T]


class Streamed(Protocol[T_co]):
    """A request whose answers come as events (:mod:`.http_stream`), resumed where it was
    when its stream breaks: run by :meth:`HttpTransport.stream`."""

    def next_request(self) -> HttpRequest | None:
        """The request that opens the stream from where it is now; None once it is over."""
        ...

    def answers(self, event: ServerEvent) -> Sequence[T_co]:
        """The answers ``event`` carries (it moves the position the next request resumes at)."""
        ...


def is_http_url(url: str) -> bool:
    """Whether ``url`` names a ``taskq serve`` (http:// or https://) rather than a store."""
    return url.startswith(HTTP_SCHEMES)


def decoded(response: httpx.Response, into: type[T]) -> T:
    """The answer's JSON as ``into`` (a record of taskq's)."""
    return msgspec.json.decode(response.content, type=into)


class _Retry(NamedTuple):
    error: errors.TaskqError
    after: float


class HttpTransport:
    """The server at ``url``, the token requests bear, and the connections kept to it.

    ``token``: else ``TASKQ_TOKEN``, else none (an open server). TLS is
    verified against the system's CAs, or ``ca`` (a PEM file) alone;
    ``verify=False`` turns that off. ``timeout``: the seconds a call may take,
    503s ridden out included (a long poll adds its own wait). ``mock``: an
    ``httpx.MockTransport`` that answers instead of a server (tests).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ca: str | Path | None = None,
        verify: bool = True,
        timeout: float = 30.0,
        mock: httpx.MockTransport | None = None,
    ) -> None:
        if not timeout > 0:
            raise errors.ConfigError(f"timeout must be above 0 seconds, got {timeout!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        bearer = token if token is not None else os.environ.get(TOKEN_ENV)
        self._headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(ca)) if ca is not None else verify
        )
        self._mock = mock
        self._blocking: httpx.Client | None = None
        self._awaiting: httpx.AsyncClient | None = None

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "base_url": self.url,
            "headers": self._headers,
            "verify": self._verify,
            "timeout": self.timeout,
        }
        if self._mock is not None:
            options["transport"] = self._mock
        return options

    def _client(self) -> httpx.Client:
        if self._blocking is None:
            self._blocking = httpx.Client(**self._options())
        return self._blocking

    def _async_client(self) -> httpx.AsyncClient:
        if self._awaiting is None:
            self._awaiting = httpx.AsyncClient(**self._options())
        return self._awaiting

    def run(self, plan: HttpPlan[T]) -> T:
        """Carry out ``plan``, blocking, on this transport's ``httpx.Client``."""
        http = self._client()
        try:
            request = next(plan)
            while True:
                deadline = time.monotonic() + self.timeout + request.wait
                try:
                    while True:
                        try:
                            response: httpx.Response | _Retry = http.send(
                                self._built(http, request)
                            )
                        except httpx.TransportError as exc:
                            response = self._unreached(request, exc)
                        answer = self._judged(response, deadline)
                        if not isinstance(answer, _Retry):
                            break
                        time.sleep(answer.after)
                except errors.TaskqError as exc:
                    request = plan.throw(exc)  # the plan's to catch (a 409 may be an answer)
                else:
                    request = plan.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result

    async def run_async(self, plan: HttpPlan[T]) -> T:
        """Carry out ``plan``, awaited, on this transport's ``httpx.AsyncClient``."""
        http = self._async_client()
        try:
            request = next(plan)
            while True:
                deadline = time.monotonic() + self.timeout + request.wait
                try:
                    while True:
                        try:
                            response: httpx.Response | _Retry = await http.send(
                                self._built(http, request)
                            )
                        except httpx.TransportError as exc:
                            response = self._unreached(request, exc)
                        answer = self._judged(response, deadline)
                        if not isinstance(answer, _Retry):
                            break
                        await anyio.sleep(answer.after)
                except errors.TaskqError as exc:
                    request = plan.throw(exc)
                else:
                    request = plan.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result

    def stream(self, streamed: Streamed[T]) -> Iterator[T]:
        """The answers of ``streamed`` as its events come, blocking; a stream that breaks is
        opened again (after a 503's Retry-After) while the call's time allows, that time
        counted afresh from each line read."""
        http = self._client()
        deadline = time.monotonic() + self.timeout
        while (request := streamed.next_request()) is not None:
            response: httpx.Response | _Retry
            try:
                response = http.send(self._built(http, request), stream=True)
            except httpx.TransportError as exc:
                response = self._unreached(request, exc)
            try:
                if isinstance(response, httpx.Response) and not response.is_success:
                    response.read()
                answer = self._judged(response, deadline)
                if isinstance(answer, _Retry):
                    time.sleep(answer.after)
                    continue
                if not _is_stream(answer):
                    yield from streamed.answers(ServerEvent("", answer.read()))
                    continue
                lines = EventLines()
                for line in answer.iter_lines():
                    deadline = time.monotonic() + self.timeout
                    if (event := lines.feed(line)) is not None:
                        yield from streamed.answers(event)
            except httpx.TransportError as exc:  # the stream broke: resume where it was
                time.sleep(_within(self._unreached(request, exc), deadline).after)
            finally:
                if isinstance(response, httpx.Response):
                    response.close()

    async def stream_async(self, streamed: Streamed[T]) -> AsyncIterator[T]:
        """The answers of ``streamed`` as its events come, awaited (as :meth:`stream`)."""
        http = self._async_client()
        deadline = time.monotonic() + self.timeout
        while (request := streamed.next_request()) is not None:
            response: httpx.Response | _Retry
            try:
                response = await http.send(self._built(http, request), stream=True)
            except httpx.TransportError as exc:
                response = self._unreached(request, exc)
            try:
                if isinstance(response, httpx.Response) and not response.is_success:
                    await response.aread()
                answer = self._judged(response, deadline)
                if isinstance(answer, _Retry):
                    await anyio.sleep(answer.after)
                    continue
                if not _is_stream(answer):
                    for piece in streamed.answers(ServerEvent("", await answer.aread())):
                        yield piece
                    continue
                lines = EventLines()
                async for line in answer.aiter_lines():
                    deadline = time.monotonic() + self.timeout
                    if (event := lines.feed(line)) is not None:
                        for piece in streamed.answers(event):
                            yield piece
            except httpx.TransportError as exc:
                await anyio.sleep(_within(self._unreached(request, exc), deadline).after)
            finally:
                if isinstance(response, httpx.Response):
                    await response.aclose()

    def _built(self, http: httpx.Client | httpx.AsyncClient, request: HttpRequest) -> httpx.Request:
        headers = dict(request.headers or {})
        if request.body is not None:
            headers["Content-Type"] = "application/json"
        timeout = httpx.Timeout(self.timeout, read=self.timeout + request.wait)
        return http.build_request(
            request.method,
            request.path,
            params=request.params,
            content=request.body,
            headers=headers,
            timeout=timeout,
        )

    def _unreached(self, request: HttpRequest, exc: httpx.TransportError) -> _Retry:
        """A request that got no answer: safe to send again unless it may have been applied."""
        where = f"taskq serve at {self.url}"
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) or request.method == "GET":
            error = errors.StoreUnavailable(f"{where} did not answer: {exc!r}")
            return _Retry(error, _UNREACHED_RETRY_SECONDS)
        raise errors.OutcomeUnknown(
            f"{request.method} {request.path}: {where} did not answer ({exc!r}); "
            "it may or may not have been applied"
        ) from exc

    def _judged(
        self, response: httpx.Response | _Retry, deadline: float
    ) -> httpx.Response | _Retry:
        """The answer, the error to retry after a while (while ``deadline`` allows), or raised."""
        if isinstance(response, _Retry):
            retry = response
        elif response.is_success:
            return response
        else:
            error = _problem_error(response)
            if response.status_code != 503:
                raise error
            retry = _Retry(error, _retry_after(response))
        return _within(retry, deadline)

    def close(self) -> None:
        """Close the blocking connections (an async client's: :meth:`aclose`)."""
        if self._blocking is not None:
            self._blocking.close()

    async def aclose(self) -> None:
        """Close every connection of this transport."""
        if self._awaiting is not None:
            await self._awaiting.aclose()
        self.close()


def _problem_error(response: httpx.Response) -> errors.TaskqError:
    """The error a refusal's problem document names (or a bare status, from a proxy)."""
    try:
        problem = msgspec.json.decode(response.content, type=Problem)
    except msgspec.MsgspecError:
        text = response.text[:200]
        problem = Problem("about:blank", response.reason_phrase, response.status_code, text)
    return error_of(problem)


def _within(retry: _Retry, deadline: float) -> _Retry:
    """``retry``, if its wait ends before ``deadline``; else its error, raised."""
    if time.monotonic() + retry.after > deadline:
        raise retry.error
    return retry


def _is_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith(EVENT_STREAM)


def _retry_after(response: httpx.Response) -> float:
    text = response.headers.get("retry-after", "")
    try:
        return max(float(text), 0.0)
    except ValueError:
        return 1.0
