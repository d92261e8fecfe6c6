"""An idempotency key that already names another workflow: a 409 that names the workflow.

A job's conflict names its job (``job_id``) and says a job; a workflow's
names the workflow (``workflow_id``) and says a workflow, in the same shape
otherwise. The Python client over HTTP still raises what a client on the
store raises, whose ``job_id`` is the workflow's first job.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

import taskq
from taskq import errors
from taskq.dev.server import ServerProcess, token_of


def _jobs(queue: str, *targets: str) -> list[dict[str, object]]:
    return [{"target": target, "queue": queue, "unchecked": True} for target in targets]


def test_a_workflow_key_taken_names_the_workflow_as_a_job_key_names_the_job(
    api: httpx.Client,
) -> None:
    queue, key = f"k-{uuid.uuid4().hex[:10]}", f"wf-{uuid.uuid4().hex}"
    first = api.post(
        "/workflows", json={"jobs": _jobs(queue, "m:f", "m:g"), "idempotency_key": key}
    )
    assert first.status_code == 201, first.text
    other = api.post("/workflows", json={"jobs": _jobs(queue, "m:h"), "idempotency_key": key})
    job_key = f"job-{key}"
    api.post("/jobs", json=_jobs(queue, "m:f")[0], headers={"Idempotency-Key": job_key})
    other_job = api.post("/jobs", json=_jobs(queue, "m:g")[0], headers={"Idempotency-Key": job_key})

    assert other.status_code == other_job.status_code == 409, other.text
    workflow, job = other.json(), other_job.json()
    assert workflow["workflow_id"] == first.json()["id"]
    assert "job_id" not in workflow
    assert workflow["title"] == job["title"].replace("a job", "a workflow")
    assert "already names a workflow" in workflow["title"]
    assert {name for name in workflow if name != "workflow_id"} == {
        name for name in job if name != "job_id"
    }
    assert (workflow["type"], workflow["field"]) == (job["type"], job["field"])


def test_the_python_client_over_http_raises_what_the_store_raises(
    served: tuple[str, ServerProcess], api: httpx.Client
) -> None:
    queue, key = f"k-{uuid.uuid4().hex[:10]}", f"wf-{uuid.uuid4().hex}"
    sent = api.post("/workflows", json={"jobs": _jobs(queue, "m:f"), "idempotency_key": key})
    assert sent.status_code == 201, sent.text
    other = taskq.step("m:other", queue=queue, unchecked=True)
    refused = []
    with (
        taskq.Client(served[0]) as on_store,
        taskq.Client(served[1].url, token=token_of("tester")) as over_http,
    ):
        for client in (on_store, over_http):
            with pytest.raises(errors.IdempotencyConflict) as caught:
                client.submit_workflow(other, idempotency_key=key)
            refused.append(caught.value)
    on_store_said, over_http_said = refused
    assert str(over_http_said) == str(on_store_said)
    assert over_http_said.job_id == on_store_said.job_id == sent.json()["job_ids"][0]
    # The raw answer names no job: the client read the workflow's first.
    assert (
        "job_id"
        not in api.post(
            "/workflows", json={"jobs": _jobs(queue, "m:other"), "idempotency_key": key}
        ).json()
    )


def test_the_openapi_document_describes_the_workflow_a_key_names(api: httpx.Client) -> None:
    document = api.get("/openapi.json").json()
    problem = document["components"]["schemas"]["Problem"]
    assert {"job_id", "workflow_id"} <= set(problem["properties"])
    answers = document["paths"]["/workflows"]["post"]["responses"]
    assert answers["409"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"
    }
    assert "workflow_id" in answers["409"]["description"]
