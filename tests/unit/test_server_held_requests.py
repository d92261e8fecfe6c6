"""Requests ``taskq serve`` holds open check their token again: a revoked one is refused.

A long poll (``GET /jobs/{id}?wait=``) that began with a token is answered
with the refusal that token meets now, as soon as it is looked at again; a
followed stream, whose 200 went out long before, ends with a ``problem``
event carrying that refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from types import SimpleNamespace

import msgspec
import pytest
from starlette.requests import Request

from taskq import errors
from taskq.broker.client.problem_types import Problem
from taskq.server import endpoint
from taskq.server.auth import Caller
from taskq.server.output import kept_alive

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

# Far shorter than the server's, so that the token is looked at again within a test.
RECHECK_SECONDS = 0.01
REVOKED = errors.Unauthorized("the bearer token is not one this server knows")


class Token:
    """A caller's token, valid until revoked: what a request held open checks again."""

    def __init__(self) -> None:
        self.revoked = False
        self.checks = 0

    def readmit(self) -> Caller:
        self.checks += 1
        if self.revoked:
            raise REVOKED
        return Caller("follower", frozenset({"read"}))


def _request(token: Token) -> Request:
    """A request that came with ``token``, as ``endpoint.guarded`` hands it on."""
    app = SimpleNamespace(state=SimpleNamespace(stopping=asyncio.Event()))
    return Request({"type": "http", "app": app, "state": {"readmit": token.readmit}})


async def test_a_long_poll_is_refused_once_its_token_is_revoked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(endpoint, "TOKEN_RECHECK_SECONDS", RECHECK_SECONDS)
    token = Token()
    job_ended = asyncio.get_running_loop().create_future()  # the job never ends here
    poll = asyncio.ensure_future(endpoint.unless_cut_short(_request(token), job_ended))
    # Held, and its token looked at again, still valid.
    await asyncio.wait_for(_until(lambda: token.checks >= 2), 10)
    assert not poll.done()
    token.revoked = True
    with pytest.raises(errors.Unauthorized) as refused:
        await asyncio.wait_for(poll, 10)
    assert refused.value is REVOKED
    assert job_ended.cancelled()  # the wait is not left running for nobody


async def test_a_long_poll_whose_token_holds_gets_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(endpoint, "TOKEN_RECHECK_SECONDS", RECHECK_SECONDS)
    token = Token()
    job_ended = asyncio.get_running_loop().create_future()
    poll = asyncio.ensure_future(endpoint.unless_cut_short(_request(token), job_ended))
    await asyncio.wait_for(_until(lambda: token.checks >= 2), 10)
    job_ended.set_result("the job")
    assert await asyncio.wait_for(poll, 10) == "the job"


async def test_a_stream_refused_midway_ends_with_a_problem_event() -> None:
    closed = asyncio.Event()
    revoked = asyncio.Event()

    async def frames() -> AsyncGenerator[bytes]:
        try:
            yield b"event: text\ndata: first\n\n"
            await asyncio.Event().wait()  # a job quiet from then on
            yield b"never sent"
        finally:
            closed.set()

    async def cut_short() -> errors.TaskqError | None:
        await revoked.wait()
        return REVOKED

    stream = kept_alive(frames(), 3600, cut_short)
    assert await asyncio.wait_for(anext(stream), 10) == b"event: text\ndata: first\n\n"
    revoked.set()
    rest = await asyncio.wait_for(_all(stream), 10)
    assert closed.is_set()
    [last] = rest
    head, data = last.decode().removesuffix("\n\n").split("\n")
    assert head == "event: problem"
    problem = msgspec.json.decode(data.removeprefix("data: "), type=Problem)
    assert (problem.type, problem.status, problem.detail) == (
        "urn:taskq:problem:Unauthorized",
        401,
        "the bearer token is not one this server knows",
    )


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(RECHECK_SECONDS)


async def _all(stream: AsyncGenerator[bytes]) -> list[bytes]:
    return [frame async for frame in stream]
