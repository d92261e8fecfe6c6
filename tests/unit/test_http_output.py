"""Following a job's output over HTTP when the stream breaks: resumed from the last piece kept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import msgspec

from taskq.broker.client.http_output import OutputOverHttp, event_id
from taskq.broker.client.http_stream import EventLines, ServerEvent
from taskq.broker.client.http_transport import HttpTransport
from taskq.broker.records import AttemptEnded, JobState, OutputEvent, OutputText

ONE = OutputText(1, 0, 4, "one\n")
TWO = OutputText(1, 4, 8, "two\n")
FAILED = AttemptEnded(1, "failed", {"message": "boom"}, JobState.QUEUED)
THREE = OutputText(2, 0, 6, "three\n")
DONE = AttemptEnded(2, "succeeded", None, JobState.SUCCEEDED)


def _frame(piece: OutputEvent) -> bytes:
    kind = type(piece).__struct_config__.tag
    return f"event: {kind}\ndata: {msgspec.json.encode(piece).decode()}\n\n".encode()


class BreakingServer:
    """Streams the pieces past the position asked for, breaking the connection after ``cut``
    frames each time; records each ``Last-Event-ID`` it was sent."""

    def __init__(self, pieces: list[OutputEvent], cut: int, *, awaited: bool = False) -> None:
        self.pieces, self.cut, self.awaited = pieces, cut, awaited
        self.resumed_from: list[str | None] = []

    def _after(self, resumed: str | None) -> list[OutputEvent]:
        if resumed is None:
            return self.pieces
        numbers, end_text = resumed.split(":")
        attempt, _, run = numbers.partition(".")
        at, end = (int(attempt), int(run or 1)), int(end_text)
        # As the server: from that byte of that run on, its end said again if it is over.
        return [
            p
            for p in self.pieces
            if (p.attempt or 0, p.run) > at
            or ((p.attempt, p.run) == at and (isinstance(p, AttemptEnded) or p.end > end))
        ]

    def frames(self, resumed: str | None) -> Iterator[bytes]:
        for sent, piece in enumerate(self._after(resumed)):
            if sent == self.cut:
                raise httpx.ReadError("connection reset by peer")
            yield b": keep-alive\n\n" + _frame(piece)

    async def frames_async(self, resumed: str | None) -> AsyncIterator[bytes]:
        for frame in self.frames(resumed):
            yield frame

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.params["follow"] == "true"
        resumed = request.headers.get("last-event-id")
        self.resumed_from.append(resumed)
        # A follow that never sees its end would ask again and again.
        assert len(self.resumed_from) <= 10, self.resumed_from[-3:]
        frames = self.frames_async(resumed) if self.awaited else self.frames(resumed)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=frames)


def _transport(server: BreakingServer) -> HttpTransport:
    return HttpTransport("http://taskq.test", timeout=5, mock=httpx.MockTransport(server))


def test_a_broken_stream_resumes_after_the_last_piece_and_repeats_nothing() -> None:
    server = BreakingServer([ONE, TWO, FAILED, THREE, DONE], cut=2)
    seen = list(_transport(server).stream(OutputOverHttp(7, follow=True)))
    assert seen == [ONE, TWO, FAILED, THREE, DONE]
    # Broken after ONE and TWO; then after FAILED and THREE.
    assert server.resumed_from == [None, "1:8", "2:6"]


def test_the_async_face_resumes_the_same_way_and_skips_an_end_said_again() -> None:
    server = BreakingServer([ONE, TWO, FAILED, THREE, DONE], cut=3, awaited=True)

    async def follow() -> list[OutputEvent]:
        transport = _transport(server)
        try:
            return [p async for p in transport.stream_async(OutputOverHttp(7, follow=True))]
        finally:
            await transport.aclose()

    assert anyio.run(follow) == [ONE, TWO, FAILED, THREE, DONE]
    # Broken after FAILED: resumed at the end of attempt 1, whose end the server says again.
    assert server.resumed_from == [None, "1:8"]


def test_a_run_handed_back_and_the_run_after_it_each_end_the_follow_once() -> None:
    # A draining worker hands the job back: its run and the next share attempt 1's number.
    released = AttemptEnded(1, "released", None, JobState.QUEUED)
    again = OutputText(1, 0, 6, "again\n", run=2)
    done = AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED, run=2)
    server = BreakingServer([ONE, released, again, done], cut=2)
    seen = list(_transport(server).stream(OutputOverHttp(7, follow=True)))
    assert seen == [ONE, released, again, done]
    # Broken after ONE and the first end, then after the second run's output: resumed in
    # run 1 (whose end, said again, is skipped), then in run 2, named as the server does.
    assert server.resumed_from == [None, "1:4", "1.2:6"]


def test_a_run_handed_back_that_printed_nothing_is_resumed_after_by_its_run() -> None:
    first = AttemptEnded(1, "released", None, JobState.QUEUED)
    second = AttemptEnded(1, "released", None, JobState.QUEUED, run=2)
    again = OutputText(1, 0, 6, "again\n", run=3)
    done = AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED, run=3)
    server = BreakingServer([ONE, first, second, again, done], cut=3)
    seen = list(_transport(server).stream(OutputOverHttp(7, follow=True)))
    assert seen == [ONE, first, second, again, done]
    # Broken after run 2's end: it printed nothing, so it is resumed from its byte 0.
    assert server.resumed_from == [None, "1.2:0"]


def test_the_first_request_asks_by_the_query_then_resumes_by_the_run_read() -> None:
    latest = OutputOverHttp(7, attempt=2, start=5, follow=True).next_request()
    assert latest is not None
    # ?attempt= is that attempt's latest run; Last-Event-ID: 2:5 would be its first.
    assert (latest.params, latest.headers) == (
        {"follow": "true", "offset": 5, "attempt": 2},
        None,
    )
    named = OutputOverHttp(7, attempt=2, run=3, start=5, follow=True)
    request = named.next_request()
    assert request is not None
    assert request.headers == {"Last-Event-ID": "2.3:5"}
    named.answers(ServerEvent("text", msgspec.json.encode(OutputText(2, 5, 9, "abc\n", run=3))))
    request = named.next_request()
    assert request is not None
    assert request.headers == {"Last-Event-ID": "2.3:9"}


def test_an_event_id_names_a_run_past_the_first_only() -> None:
    assert (event_id(2, 1, 40), event_id(2, 2, 40)) == ("2:40", "2.2:40")


def test_event_lines_join_data_lines_and_skip_comments_and_ids() -> None:
    lines = EventLines()
    fed = [
        lines.feed(line) for line in [": hi", "event: text", "id: 1:4", "data: a", "data: b", ""]
    ]
    assert fed[:-1] == [None] * 5
    assert fed[-1] == ServerEvent("text", b"a\nb")
    assert lines.feed("") is None
