"""``GET /jobs/{id}/output`` of a real ``taskq serve``, on both stores: stored, and streamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taskq.dev.server import ServerProcess, running_server, write_server_config
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.output_jobs"


pytestmark = pytest.mark.both_stores


@pytest.fixture
def server(store_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    config = write_server_config(tmp_path / "config.toml", {"reader": ["read", "submit"]})
    with running_server(store_url, config, tmp_path / "serve.log") as running:
        yield running


def _events(answer: httpx.Response) -> Iterator[tuple[str, str, dict[str, object]]]:
    """(type, id, data) of each Server-Sent Event, as they come."""
    kind, identity, data = "", "", ""
    for line in answer.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("id: "):
            identity = line.removeprefix("id: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif not line and data:
            yield kind, identity, json.loads(data)
            kind, identity, data = "", "", ""


def _text(events: list[tuple[str, str, dict[str, object]]]) -> str:
    return "".join(str(data["text"]) for _, _, data in events if data["type"] == "text")


def test_output_streams_as_events_and_resumes_from_an_offset(
    server: ServerProcess, store_url: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    queue = f"sse-{uuid.uuid4().hex[:8]}"
    workers.start(store_url, worker={"queues": [queue]})
    release = tmp_path / "release"
    job = {
        "target": f"{JOBS}:print_until_released",
        "args": ["first line", str(release)],
        "queue": queue,
        "unchecked": True,
    }
    with server.client("reader") as http:
        job_id = http.post("/jobs", json=job).json()["id"]
        seen: list[tuple[str, str, dict[str, object]]] = []
        with http.stream(
            "GET", f"/jobs/{job_id}/output", params={"follow": "true"}, timeout=60
        ) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            for event in _events(answer):
                seen.append(event)
                if _text(seen) == "first line\n":
                    release.touch()  # the job ends once its first line was streamed
        kinds = [kind for kind, _, _ in seen]
        assert kinds[0] == "text"
        assert kinds[-1] == "attempt_ended"
        assert seen[-1][2]["job_state"] == "succeeded"
        assert _text(seen).startswith("first line\n")
        assert " INFO lab.job: released by the test\n" in _text(seen)

        # Resumed after the first piece, by its id: the rest, and nothing of it again.
        first_id = seen[0][1]
        assert first_id == f"1:{seen[0][2]['end']}"
        with http.stream(
            "GET",
            f"/jobs/{job_id}/output",
            params={"follow": "true"},
            headers={"Last-Event-ID": first_id},
            timeout=60,
        ) as answer:
            resumed = list(_events(answer))
        assert resumed == seen[1:]

        stored = http.get(f"/jobs/{job_id}/output", params={"offset": 6}).json()["events"]
        assert stored[0]["start"] == 6
        from_offset = _text([("", "", event) for event in stored])
        assert from_offset.startswith("line\n")
        assert from_offset.endswith(" INFO lab.job: released by the test\n")
        bad = http.get(f"/jobs/{job_id}/output", params={"follow": "maybe"})
        assert bad.status_code == 400
        missing = http.get(f"/jobs/{job_id}/output", params={"attempt": 5})
        assert missing.status_code == 404


def test_a_followed_stream_does_not_hold_the_servers_stop(tmp_path: Path) -> None:
    # The store's kind does not matter here: SQLite's alone.
    config = write_server_config(tmp_path / "config.toml", {"reader": ["read", "submit"]})
    with running_server(f"sqlite://{tmp_path / 'taskq.db'}", config, tmp_path / "log") as server:
        _stop_while_followed(server)


def _stop_while_followed(server: ServerProcess) -> None:
    # No worker takes the queue: the job never ends, nor would its stream.
    job = {"target": f"{JOBS}:print_until_released", "queue": "nobody", "unchecked": True}
    with server.client("reader") as http:
        job_id = http.post("/jobs", json=job).json()["id"]
        with http.stream(
            "GET", f"/jobs/{job_id}/output", params={"follow": "true"}, timeout=60
        ) as answer:
            assert answer.status_code == 200
            os.kill(server.process.pid, signal.SIGTERM)
            try:
                # Bounded by the shutdown's grace (run.SHUTDOWN_GRACE_SECONDS), not the job.
                server.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("taskq serve still runs a minute after SIGTERM")
    # uvicorn ends by raising the signal it stopped on again, once it has shut down.
    assert server.process.returncode in (0, -signal.SIGTERM), server.log_tail()
    assert "Application shutdown complete" in server.log_tail()
