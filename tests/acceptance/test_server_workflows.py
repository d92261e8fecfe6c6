"""Workflows over HTTP: ``taskq serve`` as a real process on both stores, driven with httpx.

The server and its store are test_server.py's (one per store for the
module); each test works in queues of its own names.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import taskq
from taskq.broker.records import JobState
from tests.acceptance.test_server import Served, served
from tests.support.worker_process import WorkerFleet

__all__ = ["served"]  # the module's server fixture, shared with test_server.py

pytestmark = pytest.mark.timeout(240)

WAIT = 120
CALLS = "tests.support.workflow_jobs"
NO_SUCH_WORKFLOW = 987_654_321


def _queue() -> str:
    return f"http-wf-{uuid.uuid4().hex[:10]}"


def _job(queue: str, function: str, *args: Any, **members: Any) -> dict[str, Any]:
    """A job for ``POST /jobs`` or a workflow's body, by a name no worker of the test declares
    (plain functions: unchecked; tests/acceptance/test_declared_jobs.py checks names)."""
    target = f"{CALLS}:{function}"
    return {"target": target, "args": list(args), "queue": queue, "unchecked": True, **members}


def _problem(answer: Any, status: int, kind: str, field: str | None = None) -> str:
    """The answer's problem detail, once its status, type and field are as expected."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["type"] == f"urn:taskq:problem:{kind}"
    assert problem.get("field") == field, problem
    return str(problem["detail"])


def test_a_workflow_sent_children_first_is_written_whole_and_runs(
    served: Served, workers: WorkerFleet
) -> None:
    queue = _queue()
    body = {
        "name": "sums",
        "jobs": [
            _job(queue, "total", parents=[1, 2]),  # listed first, runs last
            _job(queue, "square", 3),
            _job(queue, "square", 4),
        ],
    }
    with served.http() as http:
        answer = http.post("/workflows", json=body)
        assert answer.status_code == 201, answer.text
        workflow_id, job_ids = answer.json()["id"], answer.json()["job_ids"]
        assert answer.headers["location"] == f"/workflows/{workflow_id}"
        fan_in, three, four = job_ids
        # The ids come in the body's order, whatever order the jobs were written in.
        assert http.get(f"/jobs/{fan_in}").json()["payload"]["target"] == f"{CALLS}:total"
        assert http.get(f"/jobs/{four}").json()["payload"]["args"] == [4]

        seen = http.get(f"/workflows/{workflow_id}").json()
        assert seen["workflow"]["name"] == "sums"
        assert seen["workflow"]["submitter"] == "scripts"
        assert seen["workflow"]["counts"]["waiting"] == 1
        assert seen["jobs"] == [
            {"id": job_id, "state": state}
            for job_id, state in sorted(((three, "queued"), (four, "queued"), (fan_in, "waiting")))
        ]
        assert sorted((edge["parent_id"], edge["child_id"]) for edge in seen["edges"]) == [
            (three, fan_in),
            (four, fan_in),
        ]
        listed = http.get("/jobs", params={"workflow": workflow_id}).json()["jobs"]
        assert sorted(job["id"] for job in listed) == sorted(job_ids)
        assert {job["submitter"] for job in listed} == {"scripts"}

        workers.start(served.store_url, worker={"queues": [queue], "concurrency": 2})
        served.client.wait_workflow(workflow_id, timeout=WAIT)
        outcome = http.get(f"/jobs/{fan_in}/result").json()
        assert outcome["result"] == {"sum": 25, "count": 2, "in_order": True, "parent_count": 2}
        done = http.get(f"/workflows/{workflow_id}").json()
        assert {job["state"] for job in done["jobs"]} == {"succeeded"}


def test_one_key_names_one_workflow(served: Served) -> None:
    queue = _queue()
    key = f"wf-{uuid.uuid4().hex}"
    body = {"jobs": [_job(queue, "square", 2), _job(queue, "total", parents=[0])]}
    with served.http() as http:
        first = http.post("/workflows", json={**body, "idempotency_key": key})
        again = http.post("/workflows", json=body, headers={"Idempotency-Key": key})
        assert first.status_code == again.status_code == 201, again.text
        assert first.json() == again.json()
        other = http.post("/workflows", json={**body, "name": "other", "idempotency_key": key})
        _problem(other, 409, "IdempotencyConflict", "idempotency_key")
    assert len(served.client.list(taskq.JobQuery(queue=queue))) == 2


@pytest.mark.parametrize(
    ("jobs", "field", "said"),
    [
        ([{"parents": [1]}, {"parents": [0]}], "parents", "cycle"),
        ([{}, {"parents": [2]}], "parents", "job 1 names parent position 2"),
        ([{}, {"parents": [1]}], "parents", "cycle"),
        ([{}, {"parents": [0, 0]}], "parents", "given more than once"),
        ([{"after": [1]}], "after", "job 0 runs after stored jobs [1]"),
        ([{}, {"priority": "high"}], "priority", "job 1: priority must be a whole number"),
        ([{}, {"priority": 10**12}], "priority", "job 1: priority"),
        ([{"idempotency_key": "mine"}], "idempotency_key", "job 0 brings its own"),
        ([{"colour": "red"}], "colour", "unknown field"),
        ([], "jobs", "at least one job"),
    ],
)
def test_a_bad_workflow_is_refused_naming_the_member_and_nothing_is_written(
    served: Served, jobs: list[dict[str, Any]], field: str, said: str
) -> None:
    queue = _queue()
    body = {"jobs": [{**_job(queue, "square", 1), **members} for members in jobs]}
    with served.http() as http:
        detail = _problem(http.post("/workflows", json=body), 422, "InvalidJob", field)
        assert said in detail
    assert served.client.list(taskq.JobQuery(queue=queue)) == []


def test_not_json_and_an_unknown_workflow_are_refused(served: Served) -> None:
    with served.http() as http:
        _problem(http.post("/workflows", content=b"{jobs"), 400, "BadRequest")
        for method, path in (
            ("GET", f"/workflows/{NO_SUCH_WORKFLOW}"),
            ("DELETE", f"/workflows/{NO_SUCH_WORKFLOW}"),
            ("POST", f"/workflows/{NO_SUCH_WORKFLOW}/retry"),
            ("GET", f"/workflows/{2**64}"),
        ):
            detail = _problem(http.request(method, path), 404, "WorkflowNotFound")
            assert detail.startswith("no workflow with id")
        # Text that is no whole number is a bad request, as for a job's id in a path.
        for method, path in (
            ("GET", "/workflows/abc"),
            ("DELETE", "/workflows/-1"),
            ("POST", "/workflows/1.5/retry"),
        ):
            detail = _problem(http.request(method, path), 400, "BadRequest")
            assert detail.endswith("in the path is not a workflow id (a whole number)")
        assert http.get("/jobs", params={"workflow": "x"}).status_code == 400
        # Its jobs listed, an unknown workflow is refused as GET /workflows/{id} refuses it,
        # not shown as one with no jobs.
        unknown = http.get("/jobs", params={"workflow": NO_SUCH_WORKFLOW})
        detail = _problem(unknown, 404, "WorkflowNotFound")
        assert detail.startswith(f"no workflow with id {NO_SUCH_WORKFLOW}")


@pytest.mark.parametrize(
    ("body", "got"),
    [
        ({}, "an object without jobs"),
        ([{"target": f"{CALLS}:square", "args": [1]}], "an array"),
        ("thumbnails", "a string"),
    ],
    ids=["no-jobs", "a-job-array", "a-string"],
)
def test_a_body_that_is_not_a_workflow_says_what_a_workflow_is(
    served: Served, body: Any, got: str
) -> None:
    with served.http() as http:
        detail = _problem(http.post("/workflows", json=body), 422, "InvalidJob", "jobs")
    assert detail.startswith('a workflow is an object with its jobs in "jobs": {"jobs": [')
    assert "(an array of jobs alone is a batch, for POST /jobs)" in detail
    assert detail.endswith(f"; got {got}")


def test_two_different_idempotency_keys_are_refused_and_the_same_twice_is_one(
    served: Served,
) -> None:
    queue = _queue()
    key = f"wf-{uuid.uuid4().hex}"
    body = {"jobs": [_job(queue, "square", 2)], "idempotency_key": key}
    with served.http() as http:
        both = http.post("/workflows", json=body, headers={"Idempotency-Key": f"{key}-other"})
        detail = _problem(both, 422, "InvalidJob", "idempotency_key")
        assert detail == (
            f"two idempotency keys: '{key}-other' in the Idempotency-Key header and '{key}' "
            "in the body; send one of them, or the same in both"
        )
        assert served.client.list(taskq.JobQuery(queue=queue)) == []
        same = http.post("/workflows", json=body, headers={"Idempotency-Key": key})
        assert same.status_code == 201, same.text
        # The key named it: sent again under the header alone, the same workflow.
        again = http.post(
            "/workflows", json={"jobs": body["jobs"]}, headers={"Idempotency-Key": key}
        )
        assert again.json() == same.json()
    assert len(served.client.list(taskq.JobQuery(queue=queue))) == 1


def test_workflows_are_listed_newest_first_a_page_at_a_time(served: Served) -> None:
    queue = _queue()  # no worker: the jobs stay queued and waiting
    name = f"nightly-{queue}"
    body = {"name": name, "jobs": [_job(queue, "square", 1), _job(queue, "total", parents=[0])]}
    with served.http() as http:
        older, newer = (http.post("/workflows", json=body).json()["id"] for _ in range(2))
        first = http.get("/workflows", params={"name": name, "limit": 1})
        assert first.status_code == 200, first.text
        [shown] = first.json()["workflows"]
        assert (shown["id"], shown["name"], shown["submitter"]) == (newer, name, "scripts")
        assert (shown["counts"]["queued"], shown["counts"]["waiting"]) == (1, 1)
        following = first.json()["next"]
        assert following == f"/workflows?name={name}&limit=1&before={newer}"
        rest = http.get(following).json()
        assert [info["id"] for info in rest["workflows"]] == [older]
        assert rest["next"] == f"/workflows?name={name}&limit=1&before={older}"
        assert http.get(rest["next"]).json() == {"workflows": [], "next": None}
        mine = http.get("/workflows", params={"submitter": "scripts", "before": newer + 1})
        listed = [info["id"] for info in mine.json()["workflows"]]
        assert [found for found in listed if found in (newer, older)] == [newer, older]
        assert http.delete(f"/workflows/{newer}").status_code == 200
        assert shown["status"] == "running"
        by_status = {
            status: http.get("/workflows", params={"name": name, "status": status, "limit": 1})
            for status in ("running", "cancelled", "failed")
        }
        assert [info["id"] for info in by_status["running"].json()["workflows"]] == [older]
        cancelled = by_status["cancelled"].json()
        assert [(info["id"], info["status"]) for info in cancelled["workflows"]] == [
            (newer, "cancelled")
        ]
        assert (
            cancelled["next"] == f"/workflows?name={name}&status=cancelled&limit=1&before={newer}"
        )
        assert by_status["failed"].json() == {"workflows": [], "next": None}
        # A bad query parameter is a BadRequest, as a bad limit is, naming what it takes.
        refused = http.get("/workflows", params={"status": "done"})
        assert _problem(refused, 400, "BadRequest") == (
            "query parameter status must be one of running, succeeded, failed, cancelled, "
            "got 'done'"
        )
        for params, field in (
            ({"limit": 0}, "limit"),
            ({"limit": 1001}, "limit"),
            ({"before": "x"}, "before"),
            ({"colour": "red"}, "colour"),
        ):
            assert field in _problem(http.get("/workflows", params=params), 400, "BadRequest")
        with served.http("viewer") as viewer:
            assert viewer.get("/workflows", params={"name": name}).status_code == 200
        with served.http(None) as anonymous:
            _problem(anonymous.get("/workflows"), 401, "Unauthorized")


def test_cancel_and_retry_a_workflow_say_how_many_moved(served: Served) -> None:
    queue = _queue()  # no worker: the jobs stay queued and waiting
    body = {"jobs": [_job(queue, "square", n) for n in (1, 2)] + [_job(queue, "total")]}
    body["jobs"][2]["parents"] = [0, 1]
    with served.http() as http:
        workflow_id = http.post("/workflows", json=body).json()["id"]
        with served.http("viewer") as viewer:
            assert viewer.get(f"/workflows/{workflow_id}").status_code == 200
            _problem(viewer.delete(f"/workflows/{workflow_id}"), 403, "Forbidden")
            _problem(viewer.post(f"/workflows/{workflow_id}/retry"), 403, "Forbidden")
        with served.http(None) as anonymous:
            _problem(anonymous.get(f"/workflows/{workflow_id}"), 401, "Unauthorized")
        _problem(http.post(f"/workflows/{workflow_id}/retry"), 409, "WrongState")

        cancelled = http.delete(f"/workflows/{workflow_id}")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["moved"] == 3
        assert cancelled.json()["workflow"]["counts"]["cancelled"] == 3
        _problem(http.delete(f"/workflows/{workflow_id}"), 409, "WrongState")

        retried = http.post(f"/workflows/{workflow_id}/retry")
        assert retried.status_code == 200, retried.text
        assert retried.json()["moved"] == 3
        counts = retried.json()["workflow"]["counts"]
        assert (counts["queued"], counts["waiting"]) == (2, 1)


def test_a_job_sent_after_others_waits_for_them(served: Served, workers: WorkerFleet) -> None:
    queue = _queue()
    with served.http() as http:
        parent = http.post("/jobs", json=_job(queue, "fail", max_attempts=1)).json()["id"]
        waits = http.post("/jobs", json=_job(queue, "square", 5, after=[parent])).json()["id"]
        anyway = _job(queue, "outcomes", after=[parent], run_anyway=True)
        runs = http.post("/jobs", json=anyway).json()["id"]
        assert http.get(f"/jobs/{runs}").json()["state"] == "waiting"
        missing = http.post("/jobs", json=_job(queue, "square", 1, after=[NO_SUCH_WORKFLOW]))
        assert str(NO_SUCH_WORKFLOW) in _problem(missing, 422, "InvalidJob", "after")

        workers.start(served.store_url, worker={"queues": [queue]})
        outcome = served.client.wait(runs, timeout=WAIT)
        assert outcome.result == [["dead", "ValueError"]]
        assert served.client.wait(waits, timeout=WAIT).state is JobState.CANCELLED


def test_the_openapi_document_describes_the_workflow_endpoints(served: Served) -> None:
    with served.http(None) as anonymous:
        document = anonymous.get("/openapi.json").json()
    paths, schemas = document["paths"], document["components"]["schemas"]
    assert set(paths["/workflows"]) == {"post", "get"}
    listing = paths["/workflows"]["get"]
    assert listing["security"] == [{"bearer": ["read"]}]
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/WorkflowPage"
    }
    assert set(schemas["WorkflowPage"]["properties"]) == {"workflows", "next"}
    assert set(paths["/workflows/{workflow_id}"]) == {"get", "delete"}
    assert set(paths["/workflows/{workflow_id}/retry"]) == {"post"}
    submit = paths["/workflows"]["post"]
    assert submit["security"] == [{"bearer": ["submit"]}]
    assert submit["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/WorkflowRequest"
    }
    assert submit["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SubmittedWorkflow"
    }
    read = paths["/workflows/{workflow_id}"]["get"]
    assert read["security"] == [{"bearer": ["read"]}]
    assert read["parameters"][0]["name"] == "workflow_id"
    assert "404" in read["responses"]
    job = schemas["WorkflowJob"]
    assert job["additionalProperties"] is False
    assert {"target", "parents", "after", "run_anyway"} <= set(job["properties"])
    assert job["properties"]["parents"]["items"] == {"type": "integer", "minimum": 0}
    assert job["properties"]["after"]["maxItems"] == 0  # a workflow's jobs wait on each other
    assert set(schemas["WorkflowRequest"]["properties"]) == {"jobs", "name", "idempotency_key"}
    assert set(schemas["WorkflowView"]["properties"]) == {"workflow", "jobs", "edges"}
    assert set(schemas["WorkflowMoved"]["properties"]) == {"moved", "workflow"}
    assert {"after", "run_anyway"} <= set(schemas["JobRequest"]["properties"])
