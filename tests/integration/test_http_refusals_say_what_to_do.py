"""A refusal of a request's route, query or id says what to send instead.

A method the path does not take names those it does (its ``Allow``); a
path with no route points at the document that lists them; a misspelt
query parameter names the one meant; an id no job has is said as the
store says it, unquoted.
"""

from __future__ import annotations

import httpx


def _problem(answer: httpx.Response, status: int) -> str:
    assert (answer.status_code, answer.headers["content-type"]) == (
        status,
        "application/problem+json",
    ), answer.text
    return str(answer.json()["detail"])


def test_a_method_the_path_does_not_take_names_those_it_does(api: httpx.Client) -> None:
    detail = _problem(api.get("/jobs/cancel"), 405)
    assert detail == "GET /jobs/cancel: Method Not Allowed; this path takes POST"


def test_a_path_with_no_route_points_at_the_document(api: httpx.Client) -> None:
    detail = _problem(api.get("/job"), 404)
    assert detail == "GET /job: Not Found: no such route (GET /openapi.json lists them)"


def test_a_misspelt_query_parameter_names_the_one_meant(api: httpx.Client) -> None:
    detail = _problem(api.get("/jobs", params={"sate": "queued"}), 400)
    assert detail == (
        "unknown query parameter(s) sate (did you mean state?); "
        "known: before, limit, queue, state, submitter, text, worker, workflow"
    )
    assert _problem(api.get("/jobs/1", params={"wiat": "1"}), 400) == (
        "unknown query parameter(s) wiat (did you mean wait?); known: wait"
    )


def test_an_id_no_job_can_have_is_said_as_the_store_says_an_id(api: httpx.Client) -> None:
    assert _problem(api.get("/jobs/0"), 404) == "no job with id 0"
    assert _problem(api.get("/workflows/0"), 404) == "no workflow with id 0"
    assert _problem(api.get("/jobs/" + "9" * 5000), 404) == "no job with id " + "9" * 57 + "..."
