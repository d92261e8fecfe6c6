"""A success that is not taskq serve's answer is told as a URL to check, in one line.

Another server on the port may answer 200 with a page, or with JSON of its
own: the client says which request got what answer and that the URL names
no taskq serve (:class:`taskq.errors.ConfigError`, as a refusal of another
server is told), never a JSON decode error, and never takes the page for a
success. The server here is a tiny ``http.server`` in this process, on a
loopback port, that answers every request 200.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

import taskq
from taskq import errors
from taskq.broker.client import http_plans
from taskq.broker.client.http_output import OutputOverHttp
from taskq.broker.client.http_transport import HttpTransport
from taskq.dev.processes import HOST

pytestmark = pytest.mark.timeout(60)

PAGE = b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body>Hi</body></html>\n"
# JSON, but not of any answer of taskq serve's: a health check of some other service.
OTHER_JSON = b'{"status": "ok", "uptime": 12}'


class _Answers200(BaseHTTPRequestHandler):
    """200 to every method and path: a page, or JSON of another service under ``/json``."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        json = self.server.json  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if json else "text/html")
        body = OTHER_JSON if json else PAGE
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    # http.server calls a method by the name of the request's.
    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PATCH(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet in the test's output


def _serving(json: bool) -> Iterator[str]:
    server = ThreadingHTTPServer((HOST, 0), _Answers200)
    server.json = json  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def page_server() -> Iterator[str]:
    """A server answering 200 with an HTML page to every request: its URL."""
    yield from _serving(json=False)


@pytest.fixture
def json_server() -> Iterator[str]:
    """A server answering 200 with JSON of its own to every request: its URL."""
    yield from _serving(json=True)


def test_a_page_answered_200_is_a_url_to_check(page_server: str) -> None:
    with taskq.Client(page_server, timeout=5) as client:
        with pytest.raises(errors.ConfigError) as got:
            client.get(1)
        assert str(got.value) == (
            f"no taskq serve at {page_server}: GET /jobs/1 answered 200 OK (text/html); "
            "check the URL"
        )
        with pytest.raises(errors.ConfigError) as submitted:
            client.submit("lab.jobs:add", 1, 2, unchecked=True)
        assert str(submitted.value).startswith(
            f"no taskq serve at {page_server}: POST /jobs answered 200 OK (text/html)"
        )
        with pytest.raises(errors.ConfigError, match=r"GET /jobs/1/output answered 200 OK"):
            list(client.output(1, follow=True))
    # A request whose answer is not read (a 204 from taskq serve) is not taken as done either.
    with pytest.raises(errors.ConfigError, match=r"PATCH /schedules/nightly answered 200 OK"):
        HttpTransport(page_server, timeout=5).run(http_plans.schedule_pause("nightly"))


def test_json_of_another_shape_is_a_url_to_check(json_server: str) -> None:
    with taskq.Client(json_server, timeout=5) as client:
        with pytest.raises(errors.ConfigError) as got:
            client.get(1)
        said = str(got.value)
        assert said.startswith(
            f"no taskq serve at {json_server}: GET /jobs/1 answered 200 OK (application/json, "
            "not as taskq serve's: Object missing required field `id`"
        ), said
        assert said.endswith("; check the URL")
        assert "uptime" not in said  # the body is not shown
        with pytest.raises(errors.ConfigError, match=r"POST /jobs answered 200 OK") as submitted:
            client.submit("lab.jobs:add", 1, 2, unchecked=True)
        assert "missing member `id`" in str(submitted.value)
        for follow in (False, True):
            with pytest.raises(errors.ConfigError, match=r"GET /jobs/1/output answered 200 OK"):
                list(client.output(1, follow=follow))


def test_an_event_that_is_no_output_piece_is_a_url_to_check() -> None:
    def streams(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b'event: message\ndata: {"hello": "world"}\n\n',
        )

    transport = HttpTransport("http://taskq.test", timeout=5, mock=httpx.MockTransport(streams))
    with pytest.raises(errors.ConfigError) as streamed:
        list(transport.stream(OutputOverHttp(1, follow=True)))
    assert str(streamed.value).startswith(
        "no taskq serve at http://taskq.test: GET /jobs/1/output answered 200 OK "
        "(text/event-stream, not as taskq serve's:"
    )
