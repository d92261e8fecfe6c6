"""A scripted rqlite cluster for the store's unit tests, and a clock that stands still.

The transport answers each :class:`HttpCall` through a function the test
writes, and records the calls; the clock moves only when a plan pauses (or a
test moves it). The real cluster's behaviour is checked in the rqlite tier.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from taskq.broker.stores import trampoline
from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure, SendStage
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store_url import RqliteTarget, parse_store_url

Answer = Callable[[HttpCall], HttpReply | SendFailure]


def json_reply(status: int, body: object) -> HttpReply:
    return HttpReply(status, body, json.dumps(body))


def text_reply(status: int, text: str = "") -> HttpReply:
    return HttpReply(status, None, text)


def refused(call: HttpCall) -> SendFailure:
    return SendFailure(SendStage.NOT_SENT, "ConnectionRefusedError: Connection refused")


def nothing_listens(call: HttpCall) -> SendFailure:
    return SendFailure(
        SendStage.NOT_SENT, "ConnectionRefusedError: Connection refused", refused=True
    )


def connect_timed_out(call: HttpCall) -> SendFailure:
    return SendFailure(SendStage.NOT_SENT, "TimeoutError: timed out")


@dataclass
class Scripted:
    """A transport whose every answer comes from ``answer``; it records the calls."""

    answer: Answer
    seen: list[HttpCall] = field(default_factory=list)

    def send(self, call: HttpCall) -> HttpReply | SendFailure:
        self.seen.append(call)
        return self.answer(call)

    async def send_async(self, call: HttpCall) -> HttpReply | SendFailure:
        return self.send(call)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def posts(self) -> list[tuple[str, str]]:
        return [
            (call.base_url, call.params.get("level", ""))
            for call in self.seen
            if call.method == "POST"
        ]


def scripted_store(
    answer: Answer, url: str = "rqlite://a:4001,b:4001,c:4001", **kwargs: object
) -> tuple[RqliteStore, Scripted]:
    target = parse_store_url(url)
    assert isinstance(target, RqliteTarget)
    transport = Scripted(answer)
    return RqliteStore(target, transport=transport, **kwargs), transport  # type: ignore[arg-type]


class FakeTime:
    """The store's clock: it stands still but for the pauses a plan asks for, recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    """The time of the stores made with ``clock=clock.monotonic``; their pauses move it."""
    fake = FakeTime()
    monkeypatch.setattr(trampoline.time, "sleep", fake.sleep)  # type: ignore[attr-defined]
    return fake
