"""A token revoked while its followed output stream is open: the stream ends, refused.

``taskq serve`` follows its config file's tokens (``taskq token revoke``). A
followed stream, whose 200 was sent long before, checks its token again as
it is held open: once the token is revoked it ends with a ``problem`` event
(the 401 the request would meet now), which the Python client raises as
:class:`taskq.errors.Unauthorized`, rather than going on until the job ends.
"""

from __future__ import annotations

import http.client
import json
import uuid
from pathlib import Path

import taskq
from taskq import errors
from taskq.broker.records import JobState, OutputEvent, OutputText
from taskq.dev.processes import HOST, wait_until
from taskq.dev.server import running_server, token_of, write_server_config
from tests.support.cli_runs import taskq as taskq_command
from tests.support.in_thread import in_thread
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.output_jobs"
# Bounds of waits on conditions, loose enough for a machine with every core busy.
PATIENCE_SECONDS = 60


def _raw_stream(port: int, job_id: int) -> http.client.HTTPResponse:
    """The followed stream of ``job_id`` as any HTTP client sees it, its first event begun."""
    connection = http.client.HTTPConnection(HOST, port, timeout=PATIENCE_SECONDS)
    headers = {"Authorization": f"Bearer {token_of('follower')}"}
    connection.request("GET", f"/jobs/{job_id}/output?follow=true", headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    first = response.readline()
    assert first.startswith(b"event: text"), first
    return response


def _last_event(stream: bytes) -> tuple[str, dict[str, object]]:
    """The type and the data of the last event of a stream's bytes."""
    *_, last = (block for block in stream.decode().split("\n\n") if block.strip())
    fields = dict(line.split(": ", 1) for line in last.splitlines() if not line.startswith(":"))
    return fields["event"], json.loads(fields["data"])


def _text(events: list[OutputEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, OutputText))


def test_a_revoked_token_ends_the_output_stream_it_follows(
    workers: WorkerFleet, tmp_path: Path
) -> None:
    store_url = f"sqlite://{tmp_path / 'taskq.db'}"
    queue = f"revoked-{uuid.uuid4().hex[:8]}"
    # The job's time limit outlasts every wait here: it runs until released.
    limit = 3 * PATIENCE_SECONDS
    workers.start(store_url, worker={"queues": [queue]}, max_limits={"wall_seconds": limit})
    config = tmp_path / "config.toml"
    write_server_config(config, {"ops": ["read", "submit"], "follower": ["read"]})
    release = tmp_path / "release"
    with (
        running_server(store_url, config, tmp_path / "serve.log") as server,
        taskq.Client(server.url, token=token_of("ops"), timeout=PATIENCE_SECONDS) as ops,
        taskq.Client(server.url, token=token_of("follower"), timeout=PATIENCE_SECONDS) as follower,
    ):
        target = f"{JOBS}:print_until_released"
        submitted = ops.submit(
            target, "first line", str(release), queue=queue, timeout=limit, unchecked=True
        )
        job_id = submitted.id
        seen: list[OutputEvent] = []

        def follow() -> None:
            for event in follower.output(job_id, follow=True):
                seen.append(event)

        try:
            followed = in_thread(follow)
            # The job has printed its line and waits to be released: running, and followed.
            assert wait_until(
                lambda: "first line" in _text(seen) or followed.done.is_set(), PATIENCE_SECONDS
            )
            assert not followed.done.is_set(), repr(followed.error)
            port = int(server.url.rpartition(":")[2])
            raw = _raw_stream(port, job_id)
            rest = in_thread(raw.read)

            revoked = taskq_command("token", "revoke", "follower", "--config", str(config))
            assert revoked.code == 0, revoked.err

            assert followed.done.wait(PATIENCE_SECONDS), "the stream went on after the revoke"
            assert isinstance(followed.error, errors.Unauthorized), repr(followed.error)
            assert str(followed.error) == "the bearer token is not one this server knows"
            assert rest.done.wait(PATIENCE_SECONDS), "the raw stream went on after the revoke"
            assert rest.error is None, repr(rest.error)  # it ended cleanly, not cut off
            assert isinstance(rest.value, bytes)
            kind, problem = _last_event(rest.value)
            assert (kind, problem["type"], problem["status"]) == (
                "problem",
                "urn:taskq:problem:Unauthorized",
                401,
            )
            # The job runs on, unaware: only its follower was refused.
            assert not ops.get(job_id).state.finished
        finally:
            release.touch()
        assert ops.wait(job_id, timeout=PATIENCE_SECONDS).state is JobState.SUCCEEDED
