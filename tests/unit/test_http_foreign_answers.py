"""An answer that is not taskq serve's is told in one line, as a URL to check, never its body.

``taskq serve`` answers each refusal as a problem document
(``application/problem+json``, a ``urn:taskq:problem:`` type). Another
server on the port, or a taskq serve asked under a path it does not serve,
answers otherwise: the client says which request got what answer, and
that the URL names no taskq serve (:class:`taskq.errors.ConfigError`), not
that taskq refused the request (:class:`taskq.errors.BadRequest`). The
answers here come from an ``httpx.MockTransport``, a real ``python -m
http.server`` and a real ``taskq serve``, each on a loopback port, stopped
by pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import taskq
from taskq import errors
from taskq.broker.client import http_fleet_plans, http_plans
from taskq.broker.client.http_transport import HttpTransport
from taskq.dev.processes import HOST, free_ports, process_gone, wait_until
from taskq.dev.server import running_server, token_of, write_server_config
from tests.support.cli_runs import one_error_line
from tests.support.cli_runs import taskq as taskq_command

pytestmark = pytest.mark.timeout(120)

# A bound on each wait for a process, far above what it needs.
PATIENCE = 20.0

PAGE = (
    '<!DOCTYPE HTML>\n<html lang="en">\n<head><title>Error response</title></head>\n'
    "<body><h1>Error response</h1><p>Error code: 404</p></body>\n</html>\n"
)
HTML = {"content-type": "text/html;charset=utf-8"}
PROBLEM = {"content-type": "application/problem+json"}


def _transport(answer: Callable[[httpx.Request], httpx.Response], url: str) -> HttpTransport:
    return HttpTransport(url, timeout=5, mock=httpx.MockTransport(answer))


def _job_plan() -> http_plans.HttpPlan[int]:
    return http_plans.submit_job(http_plans.by_name_body("lab.jobs:add", (1, 2), {}))


def test_another_servers_page_is_a_url_to_check_in_one_line() -> None:
    def page(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(
                501, headers=HTML, text=PAGE, extensions={"reason_phrase": b"Unsupported method"}
            )
        return httpx.Response(
            404, headers=HTML, text=PAGE, extensions={"reason_phrase": b"File not found"}
        )

    transport = _transport(page, "http://u:pw@taskq.test/")
    with pytest.raises(errors.ConfigError) as asked:
        transport.run(http_fleet_plans.queue_stats())
    assert str(asked.value) == (
        "no taskq serve at http://u:***@taskq.test: GET /queues answered 404 File not found "
        "(text/html); check the URL"
    )
    with pytest.raises(errors.ConfigError) as sent:
        transport.run(_job_plan())
    assert str(sent.value) == (
        "no taskq serve at http://u:***@taskq.test: POST /jobs answered 501 Unsupported method "
        "(text/html); check the URL"
    )


def test_a_route_taskq_serve_lacks_is_a_url_to_check_its_refusals_stay_as_they_were() -> None:
    """taskq serve's own answer for a path it has no route for (a URL with a prefix)."""

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/"):
            problem = {
                "type": "about:blank",
                "title": "Not Found",
                "status": 404,
                "detail": f"{request.method} {request.url.path}: Not Found",
            }
        elif request.method == "POST":
            problem = {
                "type": "urn:taskq:problem:InvalidJob",
                "title": "A job was refused.",
                "status": 422,
                "detail": "max_attempts must be from 1 to 2147483647, got 0",
                "field": "max_attempts",
            }
        else:
            problem = {
                "type": "urn:taskq:problem:QueueNotFound",
                "title": "No queue has that name.",
                "status": 404,
                "detail": "no queue named 'x'",
            }
        return httpx.Response(int(problem["status"]), headers=PROBLEM, json=problem)

    with pytest.raises(errors.ConfigError) as asked:
        _transport(serve, "http://taskq.test/api").run(_job_plan())
    assert not isinstance(asked.value, errors.BadRequest)
    assert str(asked.value) == (
        "no taskq serve at http://taskq.test/api: POST /api/jobs answered 404 Not Found "
        "(no such route); check the URL"
    )
    transport = _transport(serve, "http://taskq.test")
    with pytest.raises(errors.InvalidJob) as refused:
        transport.run(_job_plan())
    assert (str(refused.value), refused.value.field) == (
        "max_attempts must be from 1 to 2147483647, got 0",
        "max_attempts",
    )
    with pytest.raises(errors.QueueNotFound, match=r"^no queue named 'x'$"):
        transport.run(http_fleet_plans.queue_stats())


def test_a_proxys_failure_is_a_store_error_in_one_line() -> None:
    asked: list[httpx.Request] = []

    def failing(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        status = 502 if request.method == "POST" else 503
        return httpx.Response(status, headers={**HTML, "Retry-After": "0"}, text=PAGE)

    transport = _transport(failing, "http://taskq.test")
    with pytest.raises(errors.StoreError) as failed:
        transport.run(_job_plan())
    assert not isinstance(failed.value, errors.StoreUnavailable | errors.ConfigError)
    assert str(failed.value) == (
        "POST /jobs answered 502 Bad Gateway (text/html) at http://taskq.test, not as taskq "
        "serve answers: the server failed, or a proxy before it"
    )
    # A 503 is ridden out as any is (nothing was applied), then told the same way.
    transport = HttpTransport("http://taskq.test", timeout=0.5, mock=httpx.MockTransport(failing))
    with pytest.raises(errors.StoreUnavailable) as unavailable:
        transport.run(http_fleet_plans.queue_stats())
    assert str(unavailable.value).startswith("GET /queues answered 503 Service Unavailable")
    assert "<" not in str(unavailable.value)
    assert len(asked) > 2


# -- real servers on loopback ports


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """``python -m http.server`` on a free loopback port (its URL), stopped by pid."""
    [port] = free_ports(1)
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", HOST, "-d", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: _listens(port), PATIENCE), "http.server did not start"
        yield f"http://{HOST}:{port}"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=PATIENCE)
        assert process_gone(process.pid)


def _listens(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def test_a_client_of_another_http_server_is_told_so(http_server: str) -> None:
    with taskq.Client(http_server, timeout=5) as client:
        with pytest.raises(errors.ConfigError) as submitted:
            client.submit("lab.jobs:add", 1, 2)
        assert str(submitted.value) == (
            f"no taskq serve at {http_server}: POST /jobs answered 501 Unsupported method "
            "('POST') (text/html); check the URL"
        )
        with pytest.raises(errors.ConfigError) as got:
            client.get(1)
        assert str(got.value) == (
            f"no taskq serve at {http_server}: GET /jobs/1 answered 404 File not found "
            "(text/html); check the URL"
        )


def test_the_command_on_another_http_server_says_so_in_one_line(http_server: str) -> None:
    ran = taskq_command("--store", http_server, "jobs")
    line = one_error_line(ran, 2, f"no taskq serve at {http_server}: GET /jobs answered 404")
    assert line.endswith("(text/html); check the URL")
    assert "<" not in ran.err


def test_the_command_on_a_taskq_serve_under_a_path_says_so(tmp_path: Path) -> None:
    config = write_server_config(tmp_path / "config.toml", {"ops": ["read", "submit"]})
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, config, tmp_path / "serve.log") as server:
        url = f"{server.url}/api"
        ran = taskq_command("--store", url, "jobs", env={"TASKQ_TOKEN": token_of("ops")})
        one_error_line(
            ran,
            2,
            f"no taskq serve at {url}: GET /api/jobs answered 404 Not Found (no such route); "
            "check the URL",
        )
        with (
            taskq.Client(url, token=token_of("ops"), timeout=5) as client,
            pytest.raises(errors.ConfigError, match=r"POST /api/jobs answered 404 Not Found"),
        ):
            client.submit("lab.jobs:add", 1, 2)
