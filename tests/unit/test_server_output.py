"""The Server-Sent Events of ``GET /jobs/{id}/output?follow=true``, kept alive while quiet."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from taskq.server.output import KEEP_ALIVE_SECONDS, kept_alive

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

KEEP_ALIVE = b": keep-alive\n\n"
# Far shorter than the server's, so that a quiet spell passes in a test.
QUIET_SECONDS = 0.01


class QuietJob:
    """Frames of a job that writes a line, is quiet until let go, then writes another."""

    def __init__(self) -> None:
        self.let_go = anyio.Event()
        self.closed = False

    async def frames(self) -> AsyncGenerator[bytes]:
        try:
            yield b"event: text\ndata: first\n\n"
            await self.let_go.wait()
            yield b"event: text\ndata: second\n\n"
        finally:
            self.closed = True


def test_the_servers_interval_is_within_common_proxy_idle_timeouts() -> None:
    assert 0 < KEEP_ALIVE_SECONDS <= 30


async def test_a_quiet_stream_sends_comments_then_the_next_frame_whole() -> None:
    job = QuietJob()
    stream = kept_alive(job.frames(), QUIET_SECONDS)
    with anyio.fail_after(10):
        assert await anext(stream) == b"event: text\ndata: first\n\n"
        # The job is quiet until let go: only comments can come meanwhile.
        assert await anext(stream) == KEEP_ALIVE
        assert await anext(stream) == KEEP_ALIVE
        job.let_go.set()
        rest = [frame async for frame in stream]
    # The frame waited for across the comments comes whole, and the stream ends with the job's.
    assert [frame for frame in rest if frame != KEEP_ALIVE] == [b"event: text\ndata: second\n\n"]
    assert job.closed


async def test_a_follower_that_goes_away_during_a_quiet_spell_stops_the_reading() -> None:
    job = QuietJob()
    stream = kept_alive(job.frames(), QUIET_SECONDS)
    with anyio.fail_after(10):
        await anext(stream)
        assert await anext(stream) == KEEP_ALIVE
        await stream.aclose()
    assert job.closed
    assert not job.let_go.is_set()
