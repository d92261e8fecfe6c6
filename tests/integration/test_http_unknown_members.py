"""A member a body does not take is refused naming the member it most likely stands for.

``POST /workflows`` says it in the API's own words, naming a job by its
position as its other refusals do; ``POST /jobs`` adds the hint to the
refusal it gave. A submitter, which is the token's name, is refused saying
so wherever a submission sends one: on a job, and on a workflow whole.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

JOB = {"target": "m:f", "queue": "never-claimed", "unchecked": True}
TOKEN_NAMED = "the submitter is the name of the request's token and cannot be sent"


def _refused(answer: httpx.Response, field: str) -> str:
    """The detail of a 422 that names ``field``."""
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert (problem["type"], problem["field"]) == ("urn:taskq:problem:InvalidJob", field)
    return str(problem["detail"])


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        (
            {"jobs": [JOB, {**JOB, "depends_on": [0]}]},
            "depends_on",
            "job 1: unknown field depends_on; did you mean parents?",
        ),
        ({"jobs": [JOB], "nme": "nightly"}, "nme", "unknown field nme; did you mean name?"),
        (
            {"jobs": [JOB], "submitter": "ana"},
            "submitter",
            f"unknown field submitter; {TOKEN_NAMED}",
        ),
        (
            {"jobs": [{**JOB, "submitter": "ana"}]},
            "submitter",
            f"job 0: unknown field submitter; {TOKEN_NAMED}",
        ),
    ],
)
def test_a_workflow_member_not_taken_is_told_in_the_apis_words(
    api: httpx.Client, body: dict[str, Any], field: str, detail: str
) -> None:
    assert _refused(api.post("/workflows", json=body), field) == detail


def test_a_workflow_member_far_from_any_lists_the_known_ones(api: httpx.Client) -> None:
    detail = _refused(api.post("/workflows", json={"jobs": [{**JOB, "colour": 1}]}), "colour")
    assert detail.startswith("job 0: unknown field colour; known: after, args, ")
    assert "parents" in detail
    assert "`" not in detail  # no JSON path of msgspec's


@pytest.mark.parametrize(
    ("body", "field", "hint"),
    [
        ({**JOB, "parents": [1]}, "parents", "; did you mean after?"),
        ({**JOB, "depends_on": [1]}, "depends_on", "; did you mean after?"),
        ([JOB, {**JOB, "queu": "images"}], "queu", "; did you mean queue?"),
    ],
)
def test_a_job_member_not_taken_hints_the_one_meant(
    api: httpx.Client, body: Any, field: str, hint: str
) -> None:
    assert _refused(api.post("/jobs", json=body), field).endswith(hint)
