"""A workflow's handle read back by its id (``client.workflow_handle``), and the refusal of
anything but a workflow's id by the client's requests about a workflow, on a store and
over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import msgspec
import pytest

import taskq
import taskq.testing
from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.records import Fenced, JobState, WorkflowSubmission
from taskq.dev.server import ServerProcess, token_of
from tests.support.reports import completed, report_one
from tests.support.workflow_jobs import add, plus_parent, square, total

TOTAL = "tests.support.workflow_jobs:total"


@pytest.fixture
def client() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(submitter="test") as opened:
        yield opened


def test_a_handle_read_back_by_id_waits_for_the_same_last_steps_as_the_submitted_one(
    client: taskq.Client,
) -> None:
    start = add.step(1, 2)
    # Two last steps, one of them the end of a chain, and a step others run after.
    flow = taskq.group(start.then(plus_parent.step(10)), start.then(square.step(4))).then(total)
    flow = taskq.group(flow, square.step(5))
    submitted = client.submit_workflow(flow, name="twice")
    again = client.workflow_handle(submitted.id)
    assert isinstance(again, taskq.WorkflowHandle)
    assert (again.id, again.job_ids) == (submitted.id, submitted.job_ids)
    taskq.testing.run_due(client)
    assert again.result(timeout=0) == submitted.result(timeout=0)
    assert again.result(timeout=0)[1] == 25
    assert [job.id for job in again.jobs()] == list(submitted.job_ids)
    assert again.wait(timeout=5).counts[JobState.SUCCEEDED] == len(submitted.job_ids)


def test_a_handle_read_back_by_id_steers_the_workflow_but_takes_no_part(
    client: taskq.Client,
) -> None:
    first = add.step(1, 2)
    submitted = client.submit_workflow(first.then(plus_parent.step(10)))
    again = client.workflow_handle(submitted.id)
    assert again.cancel() == 2
    assert again.info().counts[JobState.CANCELLED] == 2
    assert again.retry() == 2
    with pytest.raises(errors.InvalidJob, match="read back by its id") as refused:
        again.jobs(first)
    assert refused.value.field == "part"
    taskq.testing.run_due(client)
    assert again.result(timeout=0) == 13


def test_jobs_a_running_job_spawned_are_neither_submitted_nor_last_steps(
    client: taskq.Client,
) -> None:
    queue = "spawns"
    submitted = client.submit_workflow(
        add.options(queue=queue).step(1, 2).then(square.options(queue=queue).step(3))
    )
    [job] = plan.run(client.store, job_claim("stand-in", [queue], limit=1, lease_seconds=60))
    spawn = WorkflowSubmission(jobs=tuple(taskq.call_spec("m:f", [n], queue=queue) for n in (1, 2)))
    report = msgspec.structs.replace(completed(job.lease, 3), spawn=spawn)
    assert plan.run(client.store, report_one(report)) is Fenced.ACCEPTED
    again = client.workflow_handle(submitted.id)
    assert again.job_ids == submitted.job_ids
    assert len(again.jobs()) == 4  # every job it has now, the spawned ones too
    [(last, _)] = client.relatives(submitted.job_ids[0]).children
    assert again._end_ids() == [last] == submitted._end_ids()


def test_a_job_joined_later_with_after_is_neither_submitted_nor_a_last_step(
    either_client: taskq.Client,
) -> None:
    queue = f"joined-{uuid.uuid4().hex[:10]}"  # the served store is shared
    first = add.options(queue=queue).step(1, 2)
    submitted = either_client.submit_workflow(first.then(square.options(queue=queue).step(3)))
    head, last = submitted.job_ids
    joined = either_client.submit(TOTAL, after=[head], queue=queue, unchecked=True)
    assert either_client.get(joined.id).workflow_id == submitted.id  # it joined the workflow
    briefs = either_client.workflow_jobs(submitted.id)
    assert [(brief.id, brief.submitted) for brief in briefs] == [
        (head, True),
        (last, True),
        (joined.id, False),
    ]
    again = either_client.workflow_handle(submitted.id)
    assert again.job_ids == submitted.job_ids
    assert again._end_ids() == [last] == submitted._end_ids()
    assert [job.id for job in again.jobs()] == [head, last, joined.id]


def test_the_async_client_reads_a_handle_back_by_id(tmp_path: Any) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"

    async def main() -> None:
        async with taskq.AsyncClient(url, submitter="async") as client:
            submitted = await client.submit_workflow(square.map([1, 2]).then(total))
            again = await client.workflow_handle(submitted.id)
            assert isinstance(again, taskq.AsyncWorkflowHandle)
            assert again.job_ids == submitted.job_ids
            assert again._end_ids() == [submitted.job_ids[2]]
            assert await again.cancel() == 3
            with pytest.raises(errors.WorkflowNotFound):
                await client.workflow_handle(submitted.id + 1000)

    anyio.run(main)


_REQUESTS: dict[str, Callable[[taskq.Client, Any], object]] = {
    "workflow": lambda client, value: client.workflow(value),
    "wait_workflow": lambda client, value: client.wait_workflow(value, timeout=0),
    "workflow_jobs": lambda client, value: client.workflow_jobs(value),
    "workflow_edges": lambda client, value: client.workflow_edges(value),
    "cancel_workflow": lambda client, value: client.cancel_workflow(value),
    "retry_workflow": lambda client, value: client.retry_workflow(value),
    "workflow_handle": lambda client, value: client.workflow_handle(value),
}


@pytest.fixture(params=["store", "http"])
def either_client(
    request: pytest.FixtureRequest, served: tuple[str, ServerProcess]
) -> Iterator[taskq.Client]:
    url, server = served
    if request.param == "store":
        with taskq.Client(url, submitter="test") as on_store:
            yield on_store
    else:
        with taskq.Client(server.url, token=token_of("tester")) as over_http:
            yield over_http


@pytest.mark.parametrize("request_name", sorted(_REQUESTS))
def test_a_request_about_a_workflow_takes_its_id_or_handle_and_refuses_anything_else(
    either_client: taskq.Client, request_name: str
) -> None:
    ask = _REQUESTS[request_name]
    queue = f"ids-{uuid.uuid4().hex[:10]}"  # the served store is shared
    handle = either_client.submit_workflow(square.options(queue=queue).step(2))
    for value, said in [
        ("abc", "not 'abc' (a str)"),
        (None, "not None"),
        (True, "not True (a bool)"),
    ]:
        with pytest.raises(errors.InvalidJob) as refused:
            ask(either_client, value)
        message = str(refused.value)
        assert message.startswith("a request about a workflow takes its id (a whole number)")
        assert said in message
        assert refused.value.field == "workflow_id"
    assert either_client.get(handle.job_ids[0]).state is JobState.QUEUED  # nothing changed
    with pytest.raises(errors.WorkflowNotFound):
        ask(either_client, handle.id + 100_000)
    # Its handle and its record stand for it, as its id does.
    if request_name in ("workflow", "workflow_jobs", "workflow_edges"):
        by_id = ask(either_client, handle.id)
        assert ask(either_client, handle) == by_id
        assert ask(either_client, either_client.workflow(handle.id)) == by_id
    if request_name == "workflow_handle":
        assert either_client.workflow_handle(handle).job_ids == handle.job_ids
