"""Each run of an attempt handed back by its worker is named by its own event ids.

A hand-back (a release, as a draining worker does) uses no attempt: the next
run has the same number. ``GET /jobs/{id}/output?follow=true`` names a piece
of an attempt's first run ``ATTEMPT:END`` and of a later run
``ATTEMPT.RUN:END``, and a ``Last-Event-ID`` resumes that very run: not the
run after it, whose bytes at the same offset are other output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.leases import Report
from taskq.broker.ops.output import AttemptOutput, OutputChunk
from taskq.broker.records import Lease
from taskq.broker.stores.store import Store
from taskq.dev.server import ServerProcess
from tests.support.reports import completed, released, report_one
from tests.support.served_jobs import posted_echo_job

# No lease of the test's claims runs out before the run it began is reported.
LEASE_SECONDS = 600.0


def _run(store: Store, queue: str, text: str, end: Callable[[Lease], Report]) -> None:
    """Claim the queue's job, store ``text`` as the run's output, and end the run."""
    claim = job_claim("runs-test", [queue], limit=1, lease_seconds=LEASE_SECONDS)
    [claimed] = plan.run(store, claim)
    output = AttemptOutput(claimed.lease, (OutputChunk(0, len(text.encode()), text),), 1 << 20)
    plan.run(store, report_one(msgspec.structs.replace(end(claimed.lease), output=output)))


@pytest.fixture
def job_id(api: httpx.Client, served: tuple[str, ServerProcess]) -> int:
    """A job whose attempt 1 ran twice: handed back after "first run", then succeeded."""
    job_id, queue = posted_echo_job(api, "runs")
    store = open_store(served[0], migrate=False)
    try:
        _run(store, queue, "first run\n", released)
        _run(store, queue, "second run\n", lambda lease: completed(lease, 1))
    finally:
        store.close()
    return job_id


def _frames(api: httpx.Client, job_id: int, resumed: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The followed stream resumed at ``resumed``, to the job's end: (type, id, data) each."""
    frames = []
    with api.stream(
        "GET",
        f"/jobs/{job_id}/output",
        params={"follow": "true"},
        headers={"Last-Event-ID": resumed},
    ) as answer:
        assert answer.status_code == 200, answer.read()
        for block in answer.read().decode().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if line[:1] != ":")
            if fields:
                frames.append((fields["event"], fields.get("id", ""), json.loads(fields["data"])))
    return frames


def test_a_resume_in_the_first_run_reads_it_then_the_run_after_it(
    api: httpx.Client, job_id: int
) -> None:
    frames = _frames(api, job_id, "1:3")
    assert [(kind, event_id) for kind, event_id, _ in frames] == [
        ("text", "1:10"),
        ("attempt_ended", "1:10"),
        ("text", "1.2:11"),
        ("attempt_ended", "1.2:11"),
    ]
    texts = [data["text"] for kind, _, data in frames if kind == "text"]
    assert texts == ["st run\n", "second run\n"]
    assert [data["run"] for _, _, data in frames] == [1, 1, 2, 2]


def test_a_resume_in_a_later_run_reads_that_run(api: httpx.Client, job_id: int) -> None:
    frames = _frames(api, job_id, "1.2:7")
    assert [(kind, event_id) for kind, event_id, _ in frames] == [
        ("text", "1.2:11"),
        ("attempt_ended", "1.2:11"),
    ]
    assert frames[0][2]["text"] == "run\n"
    # Not following: the same run, as stored.
    answer = api.get(f"/jobs/{job_id}/output", headers={"Last-Event-ID": "1.2:7"})
    assert [event.get("text") for event in answer.json()["events"]] == ["run\n", None]


def test_the_attempt_alone_in_the_query_is_its_latest_run(api: httpx.Client, job_id: int) -> None:
    answer = api.get(f"/jobs/{job_id}/output", params={"attempt": 1})
    assert answer.json()["events"][0]["text"] == "second run\n"


def test_a_run_never_begun_is_not_found(api: httpx.Client, job_id: int) -> None:
    answer = api.get(f"/jobs/{job_id}/output", headers={"Last-Event-ID": "1.3:0"})
    assert answer.status_code == 404, answer.text
    assert answer.json()["detail"] == f"job {job_id} is succeeded and has no run 3 of attempt 1"


@pytest.mark.parametrize("follow", ["false", "true"])
@pytest.mark.parametrize(
    "resumed", ["1.0:3", "1.x:3", "1.:3", ".2:3", "1.2.3:0", "1.1000001:0", "1." + "9" * 50 + ":0"]
)
def test_a_malformed_run_is_a_bad_request(
    api: httpx.Client, job_id: int, resumed: str, follow: str
) -> None:
    answer = api.get(
        f"/jobs/{job_id}/output", params={"follow": follow}, headers={"Last-Event-ID": resumed}
    )
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("Last-Event-ID must be ATTEMPT:OFFSET or ATTEMPT.RUN:OFFSET"), detail
    assert "RUN from 1 to 1000000" in detail
