"""A query parameter a route does not read is refused on every route, and nothing is done.

``GET /jobs`` refused a misspelt filter, but ``POST /jobs?wait=30`` submitted
the job and ignored ``wait``: a client that meant to wait for it, or sent a
parameter of another route, was told nothing. Every route now refuses what
it does not read (400) before it does anything, after the token is checked.
"""

from __future__ import annotations

import httpx

from taskq.dev.server import ServerProcess

JOB = {"target": "m:f", "queue": "unread-query", "unchecked": True}


def test_a_submission_with_a_query_it_does_not_read_writes_nothing(api: httpx.Client) -> None:
    refused = api.post("/jobs", json=JOB, params={"wait": "30"})
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "unknown query parameter(s) wait; this route takes none",
    )
    assert api.get("/jobs", params={"queue": "unread-query"}).json()["jobs"] == []
    job_id = api.post("/jobs", json=JOB).json()["id"]
    cancel = api.delete(f"/jobs/{job_id}", params={"force": "1"})
    assert cancel.status_code == 400, cancel.text
    assert api.get(f"/jobs/{job_id}").json()["state"] == "queued"


def test_the_token_is_checked_before_the_query(served: tuple[str, ServerProcess]) -> None:
    answer = httpx.post(f"{served[1].url}/jobs", json=JOB, params={"wait": "30"}, timeout=30)
    assert answer.status_code == 401
