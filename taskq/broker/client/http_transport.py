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
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias, TypeVar

import anyio
import httpx
import msgspec

from taskq import errors
from taskq.broker.client.problem_types import Problem, error_of

T = TypeVar("T")

HTTP_SCHEMES = ("http://", "https://")
TOKEN_ENV = "TASKQ_TOKEN"
LONG_POLL_SECONDS = 60.0
"""The longest the server holds a request open (a job waited for): under proxies' idle timeouts."""
# How long a server not reached is left before it is asked again (no Retry-After to go by).
_UNREACHED_RETRY_SECONDS = 0.5


class HttpRequest(NamedTuple):
    """One request of a plan: ``body`` is JSON already encoded; ``wait`` the seconds the
    server may hold it (a long poll), which its read timeout allows for."""

    method: str
    path: str
    params: Mapping[str, str | int | float] | None = None
    body: bytes | None = None
    wait: float = 0.0


HttpPlan: TypeAlias = Generator[HttpRequest, httpx.Response, T]


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
    503s ridden out included (a long poll adds its own wait).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ca: str | Path | None = None,
        verify: bool = True,
        timeout: float = 30.0,
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
        self._blocking: httpx.Client | None = None
        self._awaiting: httpx.AsyncClient | None = None

    def _options(self) -> dict[str, Any]:
        return {
            "base_url": self.url,
            "headers": self._headers,
            "verify": self._verify,
            "timeout": self.timeout,
        }

    def run(self, plan: HttpPlan[T]) -> T:
        """Carry out ``plan``, blocking, on this transport's ``httpx.Client``."""
        if self._blocking is None:
            self._blocking = httpx.Client(**self._options())
        http = self._blocking
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
        if self._awaiting is None:
            self._awaiting = httpx.AsyncClient(**self._options())
        http = self._awaiting
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

    def _built(self, http: httpx.Client | httpx.AsyncClient, request: HttpRequest) -> httpx.Request:
        headers = {"Content-Type": "application/json"} if request.body is not None else None
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
        if time.monotonic() + retry.after > deadline:
            raise retry.error
        return retry

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


def _retry_after(response: httpx.Response) -> float:
    text = response.headers.get("retry-after", "")
    try:
        return max(float(text), 0.0)
    except ValueError:
        return 1.0
