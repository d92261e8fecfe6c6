"""``taskq serve`` restarted under long polls and followed output: what each is told.

When the server starts to stop, a long poll is answered at once as a wait that
ran out (the job as it is now), and a followed stream ends cleanly, so that the
clients go on against the restarted server: none of them is cut off by the
stop's grace as a 500 or a broken stream.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import taskq
from taskq.broker.records import AttemptEnded, JobState, OutputEvent, OutputText
from taskq.dev.processes import HOST, free_ports, wait_until
from taskq.dev.server import ServerProcess, token_of, write_server_config
from tests.support.in_thread import in_thread
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.output_jobs"
# Bounds of waits on conditions, loose enough for a machine with every core busy.
PATIENCE_SECONDS = 120
# Longer than the stop's grace (run.SHUTDOWN_GRACE_SECONDS): a poll still held when the
# grace runs out is what uvicorn cancels.
WAIT_SECONDS = 30
_AUTH = {"Authorization": f"Bearer {token_of('reader')}"}


@contextmanager
def _serving(store_url: str, config: Path, port: int, log: Path) -> Iterator[ServerProcess]:
    """``taskq serve`` on ``port`` (the same one again after a restart), stopped by pid."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    command = [sys.executable, "-m", "taskq.cli", "--store", store_url, "--config", str(config)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*command, "serve", "--listen", f"{HOST}:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    server = ServerProcess(process, f"http://{HOST}:{port}", log, None)
    try:
        assert wait_until(lambda: _healthy(server), PATIENCE_SECONDS, interval=0.1), (
            server.log_tail()
        )
        yield server
    finally:
        server.stop()


def _healthy(server: ServerProcess) -> bool:
    assert server.process.poll() is None, server.log_tail()
    try:
        with server.client(timeout=5) as http:
            return http.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def _asked(port: int, path: str) -> http.client.HTTPConnection:
    """``GET path`` sent on a connection of its own, its answer not read yet."""
    connection = http.client.HTTPConnection(HOST, port, timeout=PATIENCE_SECONDS)
    connection.request("GET", path, headers=_AUTH)
    return connection


def _read_by_server(port: int, connection: http.client.HTTPConnection) -> bool:
    """Whether the server accepted ``connection`` and read all that was sent on it: the
    client's socket holds no byte the server's did not acknowledge, and the server's (which
    has an inode once accepted) none it did not read. Then the request is in its hands."""
    assert connection.sock is not None
    client_port = connection.sock.getsockname()[1]
    sent = read = False
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
        unacknowledged, unread = (int(count, 16) for count in fields[4].split(":"))
        if fields[3] != "01":  # not established
            continue
        if (local, remote) == (client_port, port):
            sent = unacknowledged == 0
        elif (local, remote) == (port, client_port):
            read = fields[9] != "0" and unread == 0
    return sent and read


def _answer(connection: http.client.HTTPConnection) -> tuple[int, str, bytes]:
    """Status, media type and the whole body: IncompleteRead if the body broke off."""
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, response.getheader("content-type", ""), body


def _streaming(connection: http.client.HTTPConnection) -> http.client.HTTPResponse:
    """The followed stream, once its first event (the job's first line) has begun."""
    response = connection.getresponse()
    assert response.status == 200
    first = response.readline()
    assert first.startswith(b"event: text"), first
    return response


def test_a_restart_answers_long_polls_and_ends_streams_and_the_clients_ride_it_out(
    workers: WorkerFleet, tmp_path: Path
) -> None:
    store_url = f"sqlite://{tmp_path / 'taskq.db'}"
    queue = f"restart-{uuid.uuid4().hex[:8]}"
    workers.start(store_url, worker={"queues": [queue]})
    config = write_server_config(tmp_path / "config.toml", {"reader": ["read", "submit"]})
    [port] = free_ports(1)
    log = tmp_path / "serve.log"
    release = tmp_path / "release"
    with (
        _serving(store_url, config, port, log) as first,
        taskq.Client(first.url, token=token_of("reader"), timeout=PATIENCE_SECONDS) as client,
    ):
        target = f"{JOBS}:print_until_released"
        handle = client.submit(target, "first line", str(release), queue=queue, unchecked=True)
        job_id = handle.id
        # The job has printed its line and waits to be released: running, and followed.
        stream = _streaming(_asked(port, f"/jobs/{job_id}/output?follow=true"))
        polled = _asked(port, f"/jobs/{job_id}?wait={WAIT_SECONDS}")
        outcome = _asked(port, f"/jobs/{job_id}/result?timeout={WAIT_SECONDS}")
        assert wait_until(
            lambda: _read_by_server(port, polled) and _read_by_server(port, outcome),
            PATIENCE_SECONDS,
        )
        result = in_thread(lambda: handle.result(timeout=PATIENCE_SECONDS))
        output = in_thread(lambda: list(client.output(job_id, follow=True)))
        rest = in_thread(stream.read)
        os.kill(first.process.pid, signal.SIGTERM)

        status, media_type, body = _answer(polled)
        assert (status, media_type) == (200, "application/json"), body
        assert json.loads(body)["state"] == "running"
        status, media_type, body = _answer(outcome)
        assert (status, media_type) == (202, "application/json"), body
        assert json.loads(body) == {
            "id": job_id,
            "state": "running",
            "finished": False,
            "result": None,
            "error": None,
        }
        assert rest.done.wait(PATIENCE_SECONDS)
        assert rest.error is None, repr(rest.error)  # not IncompleteRead: it ended cleanly
        assert b"attempt_ended" not in rest.value  # type: ignore[operator]
        first.process.wait(PATIENCE_SECONDS)
        said = first.log_tail()
        assert "Application shutdown complete" in said
        assert "graceful shutdown exceeded" not in said
        assert "Traceback" not in said

        with _serving(store_url, config, port, log):
            release.touch()
            assert result.done.wait(PATIENCE_SECONDS)
            assert output.done.wait(PATIENCE_SECONDS)
    assert result.error is None, repr(result.error)
    assert result.value == "released"
    assert output.error is None, repr(output.error)
    pieces: list[OutputEvent] = output.value  # type: ignore[assignment]
    text = "".join(piece.text for piece in pieces if isinstance(piece, OutputText))
    # Resumed where it broke off: the first line once, then what the job wrote after.
    assert text.startswith("first line\n")
    assert text.count("first line") == 1
    assert "released by the test" in text
    assert isinstance(pieces[-1], AttemptEnded)
    assert pieces[-1].job_state is JobState.SUCCEEDED
