"""The HTTP client's transport rides out 503s after their Retry-After, within the call's time.

``taskq serve`` answers 503 (with ``Retry-After``) while its store does not
answer; nothing was applied, so the client asks again, and gives up with the
problem's error once the next wait would end past the call's timeout. The
server here is an ``httpx.MockTransport``; the waits are real but bounded.
"""

from __future__ import annotations

import ssl
import time
import traceback

import anyio
import httpx
import pytest

import taskq
from taskq import errors
from taskq.broker.client import http_fleet_plans, http_plans
from taskq.broker.client.http_transport import HttpTransport

UNAVAILABLE = {
    "type": "urn:taskq:problem:StoreUnavailable",
    "title": "The store does not answer.",
    "status": 503,
    "detail": "no leader among 3 nodes",
}
QUEUES = {"queues": []}


class FlakyServer:
    """Answers 503 (Retry-After ``after``) ``unavailable`` times, then the queues."""

    def __init__(self, unavailable: int, after: str = "0.05") -> None:
        self.unavailable, self.after = unavailable, after
        self.asked: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(time.monotonic())
        if len(self.asked) <= self.unavailable:
            headers = {"Retry-After": self.after, "content-type": "application/problem+json"}
            return httpx.Response(503, headers=headers, json=UNAVAILABLE)
        return httpx.Response(200, json=QUEUES)


def _transport(server: FlakyServer, timeout: float) -> HttpTransport:
    return HttpTransport("http://taskq.test", timeout=timeout, mock=httpx.MockTransport(server))


def test_503s_are_asked_again_after_retry_after_until_an_answer() -> None:
    server = FlakyServer(unavailable=3)
    assert _transport(server, timeout=10).run(http_fleet_plans.queue_stats()) == []
    assert len(server.asked) == 4


def test_past_the_calls_timeout_the_503s_error_is_raised() -> None:
    server = FlakyServer(unavailable=1_000, after="0.2")
    with pytest.raises(errors.StoreUnavailable, match="no leader among 3 nodes"):
        _transport(server, timeout=0.5).run(http_fleet_plans.queue_stats())
    # Asked again while a wait of 0.2 s still fit in the half second (a sleep is never
    # shorter than asked: at most 3 times), then given up rather than asked forever.
    assert 1 <= len(server.asked) <= 3


def test_a_retry_after_longer_than_the_time_left_is_not_waited_for() -> None:
    server = FlakyServer(unavailable=1, after="3600")
    with pytest.raises(errors.StoreUnavailable):
        _transport(server, timeout=5).run(http_fleet_plans.queue_stats())
    assert len(server.asked) == 1


def test_the_async_face_rides_out_503s_the_same_way() -> None:
    server = FlakyServer(unavailable=2)

    async def ask() -> object:
        transport = _transport(server, timeout=10)
        try:
            return await transport.run_async(http_fleet_plans.queue_stats())
        finally:
            await transport.aclose()

    assert anyio.run(ask) == []
    assert len(server.asked) == 3


def test_another_refusal_is_raised_at_once() -> None:
    def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, text="not json at all")

    transport = HttpTransport("http://taskq.test", mock=httpx.MockTransport(forbidden))
    with pytest.raises(errors.TaskqError, match="400"):
        transport.run(http_fleet_plans.queue_stats())


class Unreachable:
    """Raises ``error`` for every request, as httpx does when no answer comes."""

    def __init__(self, error: httpx.TransportError) -> None:
        self.error = error
        self.asked = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked += 1
        raise self.error


def _certificate_refused(code: int, message: str) -> httpx.ConnectError:
    """A ConnectError over the certificate check that failed, as httpx raises one."""
    refused = ssl.SSLCertVerificationError(1, f"certificate verify failed: {message}")
    refused.verify_code, refused.verify_message = code, message
    try:
        raise httpx.ConnectError(str(refused)) from refused
    except httpx.ConnectError as wrapped:
        return wrapped


def test_a_server_not_reached_is_store_unavailable_once_the_time_is_up() -> None:
    server = Unreachable(httpx.ConnectError("[Errno 111] Connection refused"))
    transport = HttpTransport("http://taskq.test", timeout=1.2, mock=httpx.MockTransport(server))
    with pytest.raises(errors.StoreUnavailable, match=r"did not answer: .*Connection refused"):
        transport.run(http_fleet_plans.queue_stats())
    assert server.asked >= 2


def test_a_certificate_for_another_host_is_a_config_error_at_once() -> None:
    mismatch = "Hostname mismatch, certificate is not valid for 'taskq.test'."
    server = Unreachable(_certificate_refused(62, mismatch))
    transport = HttpTransport("https://taskq.test", timeout=10, mock=httpx.MockTransport(server))
    with pytest.raises(errors.ConfigError) as refused:
        transport.run(http_fleet_plans.queue_stats())
    assert str(refused.value) == (
        f"taskq serve at https://taskq.test: its TLS certificate is for another address "
        f"({mismatch}); use a name it holds"
    )
    assert server.asked == 1


def test_a_handshake_answered_in_plain_text_is_a_config_error_at_once() -> None:
    # OpenSSL 3.2 on calls it a failure of the record layer (3.0: a wrong version number,
    # which tests/integration/test_http_client.py meets from a real server).
    plain_text = ssl.SSLError(1, "[SSL: RECORD_LAYER_FAILURE] record layer failure")
    plain_text.reason = "RECORD_LAYER_FAILURE"
    try:
        raise httpx.ConnectError(str(plain_text)) from plain_text
    except httpx.ConnectError as wrapped:
        server = Unreachable(wrapped)
    transport = HttpTransport("https://taskq.test", timeout=10, mock=httpx.MockTransport(server))
    with pytest.raises(errors.ConfigError) as refused:
        transport.run(http_fleet_plans.queue_stats())
    assert str(refused.value) == (
        "taskq serve at https://taskq.test: the server speaks plain HTTP, not HTTPS (it "
        "answered the TLS handshake in plain text); use http://taskq.test"
    )
    assert server.asked == 1


def test_reach_gives_up_on_a_server_not_reached_within_its_bound() -> None:
    """The command line's first contact: the transport's 30 s are not waited for."""
    server = Unreachable(httpx.ConnectError("[Errno 111] Connection refused"))
    transport = HttpTransport("http://u:pw@taskq.test", mock=httpx.MockTransport(server))
    with pytest.raises(errors.StoreUnavailable) as unreached:
        transport.reach(0.3)
    assert str(unreached.value) == (
        "taskq serve at http://u:***@taskq.test did not answer: "
        "ConnectError('[Errno 111] Connection refused')"
    )
    # The next try would come after 0.5 s, past the bound: asked once, not for 30 s.
    assert server.asked == 1


def test_reach_takes_any_answer_but_a_503_and_bounds_each_try() -> None:
    asked: list[httpx.Request] = []

    def refusing(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(401 if len(asked) > 1 else 503, headers={"Retry-After": "0"})

    transport = HttpTransport("http://taskq.test", mock=httpx.MockTransport(refusing))
    transport.reach(2.5)  # a refusal is an answer: the request after it says what it means
    assert [(request.method, request.url.path) for request in asked] == [("GET", "/healthz")] * 2
    bounds = asked[0].extensions["timeout"]
    assert bounds == {"connect": 2.5, "read": 2.5, "write": 2.5, "pool": 2.5}
    # The transport's own requests keep its timeout.
    asked.clear()
    with pytest.raises(errors.TaskqError, match="401"):
        transport.run(http_fleet_plans.queue_stats())
    assert asked[0].extensions["timeout"]["connect"] == 30.0


# -- the token: its surrounding whitespace dropped, one a header cannot carry refused at once

TOKEN = "tq_-fYAAyQk3mZ8a_secret"


class Recording:
    """Answers the queues, keeping the Authorization header of each request."""

    def __init__(self) -> None:
        self.bearers: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bearers.append(request.headers.get("authorization"))
        return httpx.Response(200, json=QUEUES)


@pytest.mark.parametrize("given", [TOKEN + "\n", f"  {TOKEN}\r\n", f"\t{TOKEN} "])
def test_a_tokens_surrounding_whitespace_is_dropped(
    given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token read from a file ends in a newline; tokens hold no whitespace of their own."""
    server = Recording()
    as_argument = HttpTransport("http://taskq.test", token=given, mock=httpx.MockTransport(server))
    assert as_argument.run(http_fleet_plans.queue_stats()) == []
    monkeypatch.setenv("TASKQ_TOKEN", given)
    from_env = HttpTransport("http://taskq.test", mock=httpx.MockTransport(server))
    assert from_env.run(http_fleet_plans.queue_stats()) == []
    assert server.bearers == [f"Bearer {TOKEN}"] * 2


def test_a_blank_token_is_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKQ_TOKEN", " \n")
    server = Recording()
    HttpTransport("http://taskq.test", mock=httpx.MockTransport(server)).run(
        http_fleet_plans.queue_stats()
    )
    assert server.bearers == [None]


@pytest.mark.parametrize(
    ("inner", "kind", "place"),
    [
        ("\n", "whitespace", 12),
        (" ", "a space", 12),
        ("\x01", "a control character", 12),
        ("é", "not ASCII", 12),
        ("\x7f", "a control character", 12),
    ],
)
def test_a_token_a_header_cannot_carry_is_refused_when_the_client_is_made(
    inner: str, kind: str, place: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"{TOKEN[:11]}{inner}{TOKEN[11:]}\n"
    length = len(token.strip())
    server = Recording()
    with pytest.raises(errors.ConfigError) as refused:
        HttpTransport("http://taskq.test", token=token, mock=httpx.MockTransport(server))
    assert str(refused.value) == (
        f"the token given as token= cannot be sent in an HTTP header: character {place} of "
        f"{length} is {kind} (the tokens 'taskq token new' makes are 'tq_' then letters, "
        "digits, '-' and '_')"
    )
    monkeypatch.setenv("TASKQ_TOKEN", token)
    with pytest.raises(errors.ConfigError, match=r"^the token in TASKQ_TOKEN cannot be sent"):
        taskq.Client("http://taskq.test")
    assert server.bearers == []


def test_no_error_of_the_client_shows_its_token() -> None:
    """httpx (h11) repeats a header it refuses in its error: the client's errors do not."""
    refused_header = f"Illegal header value b'Bearer {TOKEN}'"
    server = Unreachable(httpx.LocalProtocolError(refused_header))
    transport = HttpTransport(
        "http://taskq.test", token=TOKEN, timeout=10, mock=httpx.MockTransport(server)
    )
    job = http_plans.by_name_body("lab.jobs:add", (1, 2), {})
    for plan in (http_fleet_plans.queue_stats(), http_plans.submit_job(job)):
        with pytest.raises(errors.TaskqError) as failed:
            transport.run(plan)
        # Not sent, so not applied: said at once, not after the call's 10 s.
        assert isinstance(failed.value, errors.ConfigError), failed.value
        assert "nothing was applied" in str(failed.value)
        shown = "".join(traceback.format_exception(failed.value))
        assert TOKEN not in shown
        assert "Bearer ***" in shown
    assert server.asked == 2
