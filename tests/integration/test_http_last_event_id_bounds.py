"""A ``Last-Event-ID`` past the bounds the output's query is held to is a 400 naming it.

The header resumes ``GET /jobs/{id}/output`` as ``?attempt=`` and
``?offset=`` begin it, so it is held to their bounds (those the OpenAPI
document states for them): an attempt from 1 to a million, an offset the
store can hold. Past them, or not ASCII digits, it is a bad request naming
the header, never a 500; within them, it is where the output is read from.
"""

from __future__ import annotations

import json

import httpx
import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.dev.server import ServerProcess
from tests.support.served_jobs import posted_echo_job

MAX_OFFSET = 2**63 - 1
# No lease of the test's claim runs out while the test reads the attempt's output.
LEASE_SECONDS = 600.0


@pytest.fixture
def job_id(api: httpx.Client, served: tuple[str, ServerProcess]) -> int:
    """A job whose first attempt has begun (claimed here, run by no one): its output is
    read from the store, where an offset past what it holds failed (a 500)."""
    job_id, queue = posted_echo_job(api, "last-event-id")
    store = open_store(served[0], migrate=False)
    try:
        claim = job_claim("last-event-id-test", [queue], limit=1, lease_seconds=LEASE_SECONDS)
        [claimed] = plan.run(store, claim)
    finally:
        store.close()
    assert claimed.attempt == 1
    return job_id


@pytest.mark.parametrize("follow", ["false", "true"])
@pytest.mark.parametrize(
    "resumed",
    [
        b"1:99999999999999999999999",
        f"1:{MAX_OFFSET + 1}".encode(),
        b"1000001:0",
        b"99999999999999999999999:0",
        b"1:" + b"9" * 5000,
        "1:\N{SUPERSCRIPT TWO}".encode("latin-1"),
        b"0:0",
        b"1:-1",
    ],
    ids=[
        "offset far past",
        "offset one past",
        "attempt one past",
        "attempt far past",
        "offset of 5000 digits",
        "not an ascii digit",
        "attempt 0",
        "negative offset",
    ],
)
def test_a_position_out_of_bounds_is_a_bad_request_naming_the_header(
    api: httpx.Client, job_id: int, resumed: bytes, follow: str
) -> None:
    # Streamed: a followed answer taken (a 200 of events) is seen at its headers, not
    # read until the job, which never ends, would end it.
    with api.stream(
        "GET",
        f"/jobs/{job_id}/output",
        params={"follow": follow},
        headers={"Last-Event-ID": resumed},
    ) as answer:
        got = (answer.status_code, answer.headers["content-type"])
        assert got == (400, "application/problem+json"), got
        problem = json.loads(answer.read())
    assert problem["type"] == "urn:taskq:problem:BadRequest"
    assert problem["detail"].startswith(
        "Last-Event-ID must be ATTEMPT:OFFSET or ATTEMPT.RUN:OFFSET"
    )
    bounds = f"ATTEMPT from 1 to 1000000, RUN from 1 to 1000000, OFFSET from 0 to {MAX_OFFSET}"
    assert bounds in problem["detail"]
    assert len(problem["detail"]) < 300  # a long header is not repeated whole


@pytest.mark.parametrize("resumed", [f"1:{MAX_OFFSET}", "1:0", "01:0"])
def test_a_position_within_them_is_read_from(api: httpx.Client, job_id: int, resumed: str) -> None:
    answer = api.get(f"/jobs/{job_id}/output", headers={"Last-Event-ID": resumed})
    assert (answer.status_code, answer.json()) == (200, {"events": []}), answer.text


def test_an_attempt_within_them_that_never_began_is_not_found(
    api: httpx.Client, job_id: int
) -> None:
    answer = api.get(f"/jobs/{job_id}/output", headers={"Last-Event-ID": "1000000:0"})
    assert answer.status_code == 404, answer.text
    assert answer.json()["detail"] == f"job {job_id} has no attempt 1000000 yet"


def test_the_document_states_the_same_bounds_for_the_query(api: httpx.Client) -> None:
    operation = api.get("/openapi.json").json()["paths"]["/jobs/{job_id}/output"]["get"]
    schemas = {param["name"]: param["schema"] for param in operation["parameters"]}
    assert schemas["attempt"] == {"type": "integer", "minimum": 1, "maximum": 1_000_000}
    assert schemas["offset"] == {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}
    assert schemas["follow"] == {"type": "boolean"}
    assert "text/event-stream" in operation["responses"]["200"]["content"]
