"""``taskq serve`` refuses ``run_anyway: true`` given to a job sent alone without ``after``.

Alone, a job's parents are those of ``after``; without them the store would
drop the option unsaid. The server refuses it as the Python clients do
(``taskq.broker.client.lone_submit``): a 422 naming ``run_anyway``, nothing
written, for a job of ``POST /jobs``, each job of a batch and a schedule's
job. A workflow's step takes it without ``after``: its parents are the
workflow's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

SQUARE = "tests.support.workflow_jobs:square"


def _job(queue: str, **members: Any) -> dict[str, Any]:
    return {"target": SQUARE, "args": [3], "queue": queue, "unchecked": True, **members}


def _refused(answer: httpx.Response) -> str:
    assert (answer.status_code, answer.headers["content-type"]) == (
        422,
        "application/problem+json",
    ), answer.text
    problem = answer.json()
    assert (problem["type"], problem["field"]) == ("urn:taskq:problem:InvalidJob", "run_anyway")
    assert "run_anyway=True goes with after=[...]" in problem["detail"]
    return str(problem["detail"])


def _jobs_of(api: httpx.Client, queue: str) -> list[dict[str, Any]]:
    answer = api.get("/jobs", params={"queue": queue})
    assert answer.status_code == 200, answer.text
    jobs: list[dict[str, Any]] = answer.json()["jobs"]
    return jobs


@pytest.mark.parametrize(
    ("queue", "members"),
    [
        ("alone-bare", {"run_anyway": True}),
        ("alone-empty", {"run_anyway": True, "after": []}),
        ("alone-options", {"run_anyway": True, "priority": 2}),
    ],
    ids=["no after", "after empty", "with other options"],
)
def test_a_job_sent_alone_is_refused_and_nothing_written(
    api: httpx.Client, queue: str, members: dict[str, Any]
) -> None:
    detail = _refused(api.post("/jobs", json=_job(queue, **members)))
    assert detail.startswith(f"{SQUARE}: run_anyway=True")
    assert _jobs_of(api, queue) == []


def test_a_declared_target_is_refused_before_it_is_looked_up(api: httpx.Client) -> None:
    # As the Python client refuses it before it resolves the name: no worker declares this.
    _refused(api.post("/jobs", json=_job("alone-declared", run_anyway=True, unchecked=False)))
    assert _jobs_of(api, "alone-declared") == []


def test_a_batch_names_the_entry_and_writes_none(api: httpx.Client) -> None:
    batch = [_job("alone-batch"), _job("alone-batch", run_anyway=True)]
    detail = _refused(api.post("/jobs", json=batch))
    assert detail.startswith(f"entry 2 of the batch (position 1): {SQUARE}: run_anyway=True")
    assert _jobs_of(api, "alone-batch") == []


def test_a_schedules_job_is_refused_and_no_schedule_added(api: httpx.Client) -> None:
    body = {"name": "alone-tick", "every_seconds": 60, "job": _job("alone-tick", run_anyway=True)}
    _refused(api.post("/schedules", json=body))
    names = [schedule["name"] for schedule in api.get("/schedules").json()["schedules"]]
    assert "alone-tick" not in names


def test_with_after_it_is_taken(api: httpx.Client) -> None:
    first = api.post("/jobs", json=_job("alone-after"))
    assert first.status_code == 201, first.text
    after = [first.json()["id"]]
    answer = api.post("/jobs", json=_job("alone-after", run_anyway=True, after=after))
    assert answer.status_code == 201, answer.text
    assert api.get(f"/jobs/{answer.json()['id']}").json()["run_anyway"] is True


def test_a_workflows_step_takes_it_without_after(api: httpx.Client) -> None:
    steps = [_job("alone-flow"), {**_job("alone-flow", run_anyway=True), "parents": [0]}]
    answer = api.post("/workflows", json={"jobs": steps})
    assert answer.status_code == 201, answer.text
    ids = answer.json()["job_ids"]
    assert [api.get(f"/jobs/{job_id}").json()["run_anyway"] for job_id in ids] == [False, True]
