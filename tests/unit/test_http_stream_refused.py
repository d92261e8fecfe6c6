"""A followed stream that taskq serve ends with a ``problem`` event raises the error it names.

The server sends one when it refuses to go on with a stream it began (the
follower's token revoked): the pieces before it are handed on, then the
problem's error is raised, as the same refusal answered at the start would
be, blocking and awaited alike; the stream is not opened again.
"""

from __future__ import annotations

import anyio
import httpx
import msgspec
import pytest

from taskq import errors
from taskq.broker.client.http_output import OutputOverHttp
from taskq.broker.client.http_transport import HttpTransport
from taskq.broker.records import OutputText

pytestmark = pytest.mark.timeout(30)

FIRST = OutputText(1, 0, 6, "first\n")
REVOKED = {
    "type": "urn:taskq:problem:Unauthorized",
    "title": "No valid bearer token came with the request.",
    "status": 401,
    "detail": "the bearer token is not one this server knows",
}


class RefusingServer:
    """Streams one piece, then the problem of a token revoked; counts the streams opened."""

    def __init__(self) -> None:
        self.opened = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.opened += 1
        piece = msgspec.json.encode(FIRST).decode()
        body = (
            f"event: text\nid: 1:6\ndata: {piece}\n\n"
            f"event: problem\ndata: {msgspec.json.encode(REVOKED).decode()}\n\n"
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)


def test_the_pieces_before_a_problem_event_come_then_its_error() -> None:
    server = RefusingServer()
    transport = HttpTransport("http://taskq.test", timeout=5, mock=httpx.MockTransport(server))
    seen = []

    def follow() -> None:
        for piece in transport.stream(OutputOverHttp(7, follow=True)):
            seen.append(piece)

    with pytest.raises(errors.Unauthorized) as refused:
        follow()
    assert seen == [FIRST]
    assert str(refused.value) == "the bearer token is not one this server knows"
    assert server.opened == 1


def test_an_awaited_stream_raises_the_problem_too() -> None:
    server = RefusingServer()
    transport = HttpTransport("http://taskq.test", timeout=5, mock=httpx.MockTransport(server))
    seen = []

    async def follow() -> None:
        async for piece in transport.stream_async(OutputOverHttp(7, follow=True)):
            seen.append(piece)

    with pytest.raises(errors.Unauthorized, match=r"^the bearer token is not one this server"):
        anyio.run(follow)
    assert seen == [FIRST]
    assert server.opened == 1
