"""A route an older taskq serve lacks is told as such, with the server's version.

taskq serve answers a path or a method it has no route for with an
``about:blank`` problem (404 or 405), as other servers may. The client then
asks its ``/openapi.json``: taskq serve's names it and its version, so the
error says the server is taskq serve that does not offer the operation
(probably an older one), not that the URL is wrong. A server whose
document says nothing of taskq is still a URL to check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

import taskq
from taskq import errors
from taskq.broker.client import http_plans
from taskq.broker.client.http_output import OutputOverHttp
from taskq.broker.client.http_requests import HttpPlan, HttpRequest
from taskq.broker.client.http_transport import HttpTransport
from taskq.dev.server import running_server, token_of, write_server_config

pytestmark = pytest.mark.timeout(120)

PROBLEM = {"content-type": "application/problem+json"}
# What an older taskq serve describes itself as (its OpenAPI document's info).
OLDER = {"openapi": "3.1.0", "info": {"title": "taskq", "version": "0.0.9"}, "paths": {}}


def _older_server(described: dict[str, object]) -> Callable[[httpx.Request], httpx.Response]:
    """A server with no route but ``/openapi.json``, which answers ``described``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/openapi.json":
            return httpx.Response(200, json=described)
        status = 405 if request.method == "PATCH" else 404
        problem = {
            "type": "about:blank",
            "title": "Not Found" if status == 404 else "Method Not Allowed",
            "status": status,
            "detail": f"{request.method} {request.url.path}: Not Found",
        }
        return httpx.Response(status, headers=PROBLEM, json=problem)

    return answer


def _transport(answer: Callable[[httpx.Request], httpx.Response]) -> HttpTransport:
    return HttpTransport("http://u:pw@taskq.test", timeout=5, mock=httpx.MockTransport(answer))


def _older_than_this_client(asked: str, version: str, url: str = "http://u:***@taskq.test") -> str:
    return (
        f"taskq serve at {url} (version {version}) does not offer {asked}, which this client "
        f"(taskq {taskq.__version__}) asks for: the server is probably older; upgrade it"
    )


def test_a_route_an_older_taskq_serve_lacks_names_its_version() -> None:
    transport = _transport(_older_server(OLDER))
    with pytest.raises(errors.ConfigError) as relatives:
        transport.run(http_plans.job_relatives(5))
    assert str(relatives.value) == _older_than_this_client("GET /jobs/5/relatives", "0.0.9")
    with pytest.raises(errors.ConfigError) as paused:
        transport.run(http_plans.schedule_pause("nightly"))
    assert str(paused.value) == _older_than_this_client("PATCH /schedules/nightly", "0.0.9")
    # A followed stream is opened through the same answers.
    with pytest.raises(errors.ConfigError) as followed:
        list(transport.stream(OutputOverHttp(5, follow=True)))
    assert str(followed.value) == _older_than_this_client("GET /jobs/5/output", "0.0.9")
    # A document of another service's: the server is no taskq serve, the URL is to check.
    billing = {"openapi": "3.1.0", "info": {"title": "billing", "version": "2.0"}, "paths": {}}
    with pytest.raises(errors.ConfigError) as elsewhere:
        _transport(_older_server(billing)).run(http_plans.job_relatives(5))
    assert str(elsewhere.value) == (
        "no taskq serve at http://u:***@taskq.test: GET /jobs/5/relatives answered 404 Not Found "
        "(no such route); check the URL"
    )


def _unknown_route() -> HttpPlan[None]:
    yield HttpRequest("GET", "/jobs/5/horoscope")


def test_a_real_taskq_serve_names_its_version_for_a_route_it_lacks(tmp_path: Path) -> None:
    config = write_server_config(tmp_path / "config.toml", {"ops": ["read"]})
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, config, tmp_path / "serve.log") as server:
        transport = HttpTransport(server.url, token=token_of("ops"), timeout=30)
        try:
            with pytest.raises(errors.ConfigError) as asked:
                transport.run(_unknown_route())
        finally:
            transport.close()
    assert str(asked.value) == _older_than_this_client(
        "GET /jobs/5/horoscope", taskq.__version__, url=server.url
    )
