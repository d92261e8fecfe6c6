"""``/openapi.json`` names every query parameter each route reads, and no other.

A client generated from the document (Go, TypeScript) can send only what
it names: the filters and pages of ``GET /jobs``, a long poll's ``wait``, an
output's ``follow``. The server refuses a query parameter a route does not
read, listing those it does (``known: ...``); that list, for every route the
document has, is the one the document gives. A route that lists none takes
no query at all, and says so.
"""

from __future__ import annotations

from typing import Any

import httpx

# A value for each parameter of a path: a job or a workflow that need not exist, since
# the query is read before the store is.
_PATH_VALUES = {"job_id": "1", "workflow_id": "1", "worker_id": "w", "name": "n"}
_UNREAD = "zz_not_a_parameter"


def _read_ones(api: httpx.Client, path: str) -> set[str]:
    """The query parameters the server says ``GET path`` reads: every route refuses
    another, naming those it reads, or saying it takes none."""
    answer = api.get(path.format(**_PATH_VALUES), params={_UNREAD: "1"})
    assert answer.status_code == 400, (path, answer.text)
    detail = answer.json()["detail"]
    if detail == f"unknown query parameter(s) {_UNREAD}; this route takes none":
        return set()
    assert detail.startswith(f"unknown query parameter(s) {_UNREAD}; known: "), detail
    return set(detail.partition("; known: ")[2].split(", "))


def test_the_document_names_every_query_parameter_a_route_reads(api: httpx.Client) -> None:
    document: dict[str, Any] = api.get("/openapi.json").json()
    gets = {path: ops["get"] for path, ops in document["paths"].items() if "get" in ops}
    declared = {
        path: {param["name"] for param in op["parameters"] if param["in"] == "query"}
        for path, op in gets.items()
    }
    read = {path: _read_ones(api, path) for path in gets}
    assert declared == read
    assert read["/jobs"] >= {"state", "queue", "workflow", "limit", "before"}
    assert read["/jobs/{job_id}/output"] == {"attempt", "offset", "follow"}


def test_a_declared_query_parameter_states_the_bounds_the_server_holds(
    api: httpx.Client,
) -> None:
    document: dict[str, Any] = api.get("/openapi.json").json()
    limit = next(
        param["schema"]
        for param in document["paths"]["/jobs"]["get"]["parameters"]
        if param["name"] == "limit"
    )
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    for past, status in [(limit["maximum"], 200), (limit["maximum"] + 1, 400)]:
        assert api.get("/jobs", params={"limit": past}).status_code == status


def test_a_submission_declares_its_idempotency_key_header(api: httpx.Client) -> None:
    document: dict[str, Any] = api.get("/openapi.json").json()
    for path in ("/jobs", "/workflows"):
        headers = [
            param["name"]
            for param in document["paths"][path]["post"]["parameters"]
            if param["in"] == "header"
        ]
        assert headers == ["Idempotency-Key"], path


def test_the_idempotency_key_header_is_held_to_the_bound_the_document_states(
    api: httpx.Client,
) -> None:
    document: dict[str, Any] = api.get("/openapi.json").json()
    [header] = [
        param["schema"]
        for param in document["paths"]["/jobs"]["post"]["parameters"]
        if param["name"] == "Idempotency-Key"
    ]
    longest = header["maxLength"]
    job = {"target": "m:f", "queue": "never-claimed", "unchecked": True}
    too_long = api.post("/jobs", json=[job, job], headers={"Idempotency-Key": "k" * (longest + 1)})
    assert (too_long.status_code, too_long.json()["field"]) == (422, "idempotency_key")
    assert api.get("/jobs", params={"queue": "never-claimed"}).json()["jobs"] == []
    # At the bound, every job of a batch gets a key the store takes (KEY:i).
    at_most = api.post("/jobs", json=[job, job], headers={"Idempotency-Key": "k" * longest})
    assert at_most.status_code == 201, at_most.text
    # An empty header is no key at all, as the schema (no minLength) lets it be.
    assert "minLength" not in header
    assert api.post("/jobs", json=job, headers={"Idempotency-Key": ""}).status_code == 201


def test_a_followed_output_is_declared_as_server_sent_events(api: httpx.Client) -> None:
    document: dict[str, Any] = api.get("/openapi.json").json()
    answer = document["paths"]["/jobs/{job_id}/output"]["get"]["responses"]["200"]
    assert set(answer["content"]) == {"application/json", "text/event-stream"}
