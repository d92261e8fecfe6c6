"""Carrying a client's requests to ``taskq serve`` over HTTP: one keep-alive connection pool.

:class:`HttpTransport` runs a request's plan (:mod:`.http_requests`) with the
one trampoline of every plan in taskq (:mod:`taskq.broker.stores.trampoline`),
blocking (``httpx.Client``) or awaited (``httpx.AsyncClient``), one of each at
most per taskq client. It only moves requests and answers: what an answer
means, and when to ask again, is :mod:`.http_answers`'s.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import httpx

from taskq import errors
from taskq.broker.client import tls_probe
from taskq.broker.client.http_answers import (
    Sent,
    Unanswered,
    answered,
    asked_again,
    event_answers,
)
from taskq.broker.client.http_requests import TOKEN_ENV, HttpPlan, HttpRequest, Streamed
from taskq.broker.client.http_stream import EVENT_STREAM, EventLines, ServerEvent
from taskq.broker.stores.trampoline import drive, drive_async

T = TypeVar("T")

# What :meth:`HttpTransport.reach` asks: it needs no token and does not touch the store, so
# any server that runs answers it, at once.
_ALIVE = HttpRequest("GET", "/healthz")


class HttpTransport:
    """The server at ``url``, the token requests bear, and the connections kept to it.

    ``token``: else ``TASKQ_TOKEN``, else none (an open server); its surrounding
    whitespace is dropped, and one that still cannot go in a header is refused
    at once (:class:`taskq.errors.ConfigError`, never showing it). TLS is
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
        self._token = bearer_token(token)
        self._headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
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
        return drive(asked_again(plan, self.url, self.timeout), self._send)

    async def run_async(self, plan: HttpPlan[T]) -> T:
        """Carry out ``plan``, awaited, on this transport's ``httpx.AsyncClient``."""
        return await drive_async(asked_again(plan, self.url, self.timeout), self._send_async)

    def reach(self, within: float) -> None:
        """Raise the error of a server that cannot be reached, found out within about
        ``within`` seconds, not the call's ``timeout``: for a person waiting on a command,
        where a script would rather ride out a restart. Its ``/healthz`` is asked again while
        refused (or a 503) until ``within`` has passed, each try given ``within`` too (twice
        that at worst); any other answer, a refusal included, means it was reached. The
        connection it opens is the one the next request takes."""
        deadline = time.monotonic() + within
        contact = answered(_ALIVE, self.url, deadline, any_answer=True)
        drive(contact, functools.partial(self._send, timeout=within))

    def stream(self, streamed: Streamed[T]) -> Iterator[T]:
        """The answers of ``streamed`` as its events come, blocking; a stream that breaks is
        opened again (after a 503's Retry-After) while the call's time allows, that time
        counted afresh from each line read."""
        deadline = time.monotonic() + self.timeout
        broken: httpx.TransportError | None = None
        while (request := streamed.next_request()) is not None:
            opening = answered(request, self.url, deadline, broken=broken)
            response = drive(opening, self._open)
            broken = None
            try:
                if not _is_stream(response):
                    whole = ServerEvent("", response.read())
                    yield from event_answers(streamed, whole, response, self.url)
                    continue
                lines = EventLines()
                for line in response.iter_lines():
                    deadline = time.monotonic() + self.timeout
                    if (event := lines.feed(line)) is not None:
                        yield from event_answers(streamed, event, response, self.url)
            except httpx.TransportError as exc:  # the stream broke: resume where it was
                broken = self._hidden(exc)
            finally:
                response.close()

    async def stream_async(self, streamed: Streamed[T]) -> AsyncIterator[T]:
        """The answers of ``streamed`` as its events come, awaited (as :meth:`stream`)."""
        deadline = time.monotonic() + self.timeout
        broken: httpx.TransportError | None = None
        while (request := streamed.next_request()) is not None:
            opening = answered(request, self.url, deadline, broken=broken)
            response = await drive_async(opening, self._open_async)
            broken = None
            try:
                if not _is_stream(response):
                    whole = ServerEvent("", await response.aread())
                    for piece in event_answers(streamed, whole, response, self.url):
                        yield piece
                    continue
                lines = EventLines()
                async for line in response.aiter_lines():
                    deadline = time.monotonic() + self.timeout
                    if (event := lines.feed(line)) is not None:
                        for piece in event_answers(streamed, event, response, self.url):
                            yield piece
            except httpx.TransportError as exc:
                broken = self._hidden(exc)
            finally:
                await response.aclose()

    def _send(self, request: HttpRequest, *, timeout: float | None = None) -> Sent:
        """``request`` sent; ``timeout``: its own, shorter than the transport's."""
        http = self._client()
        try:
            return http.send(self._built(http, request, timeout))
        except httpx.TransportError as exc:
            return self._unanswered(exc, timeout)

    async def _send_async(self, request: HttpRequest) -> Sent:
        http = self._async_client()
        try:
            return await http.send(self._built(http, request))
        except httpx.TransportError as exc:
            return await self._unanswered_async(exc)

    def _open(self, request: HttpRequest) -> Sent:
        """``request`` sent, its answer left to be read as it comes if it is a stream."""
        http = self._client()
        try:
            response = http.send(self._built(http, request), stream=True)
            if not (response.is_success and _is_stream(response)):
                try:
                    # A refusal's problem, or a document (the OpenAPI one a refusal may
                    # have asked for), whole: nothing more will come.
                    response.read()
                finally:
                    response.close()
        except httpx.TransportError as exc:
            return self._unanswered(exc)
        return response

    async def _open_async(self, request: HttpRequest) -> Sent:
        http = self._async_client()
        try:
            response = await http.send(self._built(http, request), stream=True)
            if not (response.is_success and _is_stream(response)):
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except httpx.TransportError as exc:
            return await self._unanswered_async(exc)
        return response

    def _unanswered(self, exc: httpx.TransportError, timeout: float | None = None) -> Unanswered:
        """A request that got no answer; from a server that hung up on plain HTTP, whether
        it speaks TLS (it serves HTTPS: the URL is wrong) is asked too, within ``timeout``."""
        exc = self._hidden(exc)
        if not self._hung_up_on_plain_http(exc):
            return Unanswered(exc)
        probed = tls_probe.speaks_tls(self.url, self.timeout if timeout is None else timeout)
        return Unanswered(exc, speaks_tls=probed)

    async def _unanswered_async(self, exc: httpx.TransportError) -> Unanswered:
        """As :meth:`_unanswered`, the handshake made in a thread."""
        exc = self._hidden(exc)
        if not self._hung_up_on_plain_http(exc):
            return Unanswered(exc)
        speaks_tls = await anyio.to_thread.run_sync(tls_probe.speaks_tls, self.url, self.timeout)
        return Unanswered(exc, speaks_tls=speaks_tls)

    def _hidden(self, exc: httpx.TransportError) -> httpx.TransportError:
        """``exc``, or one like it whose message does not show the token: h11 repeats a
        header it refuses, and the error of a request that got no answer quotes ``exc``."""
        if not self._token:
            return exc
        text = str(exc)
        # As itself, and as the repr of the header's bytes that h11 quotes.
        for shown in {self._token, repr(self._token.encode())[2:-1]}:
            text = text.replace(shown, "***")
        if text == str(exc):
            return exc
        try:
            request: httpx.Request | None = exc.request
        except RuntimeError:  # one raised before httpx gave it its request
            request = None
        # Not chained to ``exc``: a traceback would print its message, token and all.
        return type(exc)(text, request=request)

    def _hung_up_on_plain_http(self, exc: httpx.TransportError) -> bool:
        # A mock stands in for the server: there is none to ask. A server that hangs up
        # with a request's body still unread resets the connection (ReadError) rather than
        # closing it: a POST to a TLS port often, when the body comes after its first read.
        return (
            self._mock is None
            and self.url.startswith("http://")
            and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError))
        )

    def _built(
        self,
        http: httpx.Client | httpx.AsyncClient,
        request: HttpRequest,
        timeout: float | None = None,
    ) -> httpx.Request:
        headers = dict(request.headers or {})
        if request.body is not None:
            headers["Content-Type"] = "application/json"
        seconds = self.timeout if timeout is None else timeout
        bounds = httpx.Timeout(seconds, read=seconds + request.wait)
        return http.build_request(
            request.method,
            request.path,
            params=request.params,
            content=request.body,
            headers=headers,
            timeout=bounds,
        )

    def close(self) -> None:
        """Close the blocking connections (an async client's: :meth:`aclose`)."""
        if self._blocking is not None:
            self._blocking.close()

    async def aclose(self) -> None:
        """Close every connection of this transport."""
        if self._awaiting is not None:
            await self._awaiting.aclose()
        self.close()


def bearer_token(token: str | None) -> str | None:
    """The token requests bear: ``token``, else ``TASKQ_TOKEN``, its surrounding whitespace
    dropped (a file read whole ends in a newline; no token holds whitespace); None if empty.

    One that still holds what a header cannot carry (a control character, a
    space, a character beyond ASCII) is :class:`taskq.errors.ConfigError` now,
    rather than a request that fails each time it is sent; the error says
    where and what, never the token.
    """
    given = token if token is not None else os.environ.get(TOKEN_ENV)
    if given is None:
        return None
    stripped = given.strip()
    for place, char in enumerate(stripped, start=1):
        if not "!" <= char <= "~":  # a header's visible ASCII (RFC 9110's VCHAR)
            source = "given as token=" if token is not None else f"in {TOKEN_ENV}"
            raise errors.ConfigError(
                f"the token {source} cannot be sent in an HTTP header: character {place} of "
                f"{len(stripped)} is {_kind_of(char)} (the tokens 'taskq token new' makes are "
                "'tq_' then letters, digits, '-' and '_')"
            )
    return stripped or None


def _kind_of(char: str) -> str:
    """What a character a header cannot carry is, without showing it (it is the token's)."""
    if char.isspace():
        return "a space" if char == " " else "whitespace"
    if not char.isascii():
        return "not ASCII"
    return "a control character"


def _is_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith(EVENT_STREAM)
