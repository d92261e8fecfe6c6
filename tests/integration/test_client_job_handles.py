"""Every request about a job takes its handle or record where it takes its id, and refuses the
rest (a workflow's handle, a string) in one sentence: on both stores and over HTTP, from the
blocking client and the async one, through the one conversion after= uses."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import taskq
from taskq import errors
from taskq.broker.records import AttemptEnded, JobBrief, JobState, Relatives
from taskq.dev.server import ServerProcess, token_of
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster

ENDED_UNRUN = AttemptEnded(
    None,
    None,
    {"type": "Cancelled", "message": "cancelled by request while queued"},
    JobState.CANCELLED,
)
# Each request about one job, as called, and what it is for a workflow.
REQUESTS: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("get", lambda client, job: client.get(job), "workflow"),
    ("wait", lambda client, job: client.wait(job, timeout=5), "wait_workflow"),
    ("executions", lambda client, job: client.executions(job), "workflow"),
    ("output", lambda client, job: list(client.output(job)), "workflow"),
    ("relatives", lambda client, job: client.relatives(job), "workflow"),
    ("cancel", lambda client, job: client.cancel(job), "cancel_workflow"),
    ("retry", lambda client, job: client.retry(job), "retry_workflow"),
]


@pytest.fixture(params=[*STORE_KINDS, "http"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """Makes a client, Client or AsyncClient, of a SQLite file, the shared rqlite cluster or a
    ``taskq serve``."""
    if request.param == "http":
        server: ServerProcess = request.getfixturevalue("served")[1]
        return lambda kind=taskq.Client: kind(server.url, token=token_of("tester"))
    if request.param == "rqlite":
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        url = cluster.url
    else:
        url = f"sqlite://{tmp_path / 'taskq.db'}"
    return lambda kind=taskq.Client: kind(url, submitter="tester")


@pytest.fixture
def client(connect: Callable[..., taskq.Client]) -> Iterator[taskq.Client]:
    with connect() as made:
        yield made


@pytest.fixture
def queue() -> str:
    return f"refs-{uuid.uuid4().hex[:10]}"  # the rqlite cluster and the server are shared


def test_each_request_about_a_job_takes_its_handle_or_its_record(
    client: taskq.Client, queue: str
) -> None:
    handle, other = client.submit_many([taskq.call_spec("m:f", [i], queue=queue) for i in (1, 2)])
    record = client.get(handle)
    assert record.id == handle.id
    assert client.get(record).id == client.get(JobBrief(handle.id, JobState.QUEUED)).id == handle.id
    assert client.executions(handle) == []
    assert client.relatives(record) == Relatives(parents=(), children=())
    assert client.cancel(handle, other.id).cancelled == (handle.id, other.id)
    assert client.wait(other, timeout=5).state is JobState.CANCELLED
    assert list(client.output(other)) == [ENDED_UNRUN]
    assert client.retry(record) == [handle.id]
    assert handle.status() is JobState.QUEUED
    assert client.get(_Index(other.id)).id == other.id  # numpy's integers, say


class _Index:
    """An integer of another kind than int: one with ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_a_workflow_or_a_string_given_for_a_job_is_refused_naming_what_is_taken(
    client: taskq.Client, queue: str
) -> None:
    pipeline = client.submit_workflow(taskq.step("m:f", 1, queue=queue, unchecked=True))
    for request, call, instead in REQUESTS:
        with pytest.raises(errors.InvalidJob) as refused:
            call(client, pipeline)
        assert str(refused.value) == (
            f"client.{request}() takes a job's id, handle or record, not workflow "
            f"{pipeline.id} (a WorkflowHandle): a workflow's own requests take its id, "
            f"as in client.{instead}({pipeline.id})"
        )
        assert refused.value.field == "job_id"
        with pytest.raises(errors.InvalidJob) as refused:
            call(client, str(pipeline.job_ids[0]))
        assert str(refused.value) == (
            f"client.{request}() takes a job's id, handle or record, "
            f"not '{pipeline.job_ids[0]}' (a str)"
        )
    assert client.workflow(pipeline.id).counts[JobState.QUEUED] == 1  # nothing moved
    with pytest.raises(errors.InvalidJob, match=r"^client\.cancel\(\) takes .*, not None$"):
        client.cancel(pipeline.job_ids[0], None)  # type: ignore[arg-type]
    assert client.get(pipeline.job_ids[0]).state is JobState.QUEUED


def test_the_async_client_takes_its_handles_and_refuses_a_workflows(
    connect: Callable[..., taskq.AsyncClient], queue: str
) -> None:
    async def scenario() -> None:
        async with connect(taskq.AsyncClient) as client:
            handle = await client.submit("m:f", queue=queue, unchecked=True)
            assert (await client.get(handle)).id == handle.id
            assert (await client.cancel(handle)).cancelled == (handle.id,)
            assert [event async for event in client.output(handle)] == [ENDED_UNRUN]
            pipeline = await client.submit_workflow(taskq.step("m:f", queue=queue, unchecked=True))
            for refused_call in (client.get, client.retry, client.relatives):
                with pytest.raises(errors.InvalidJob, match=r"\(an AsyncWorkflowHandle\)"):
                    await refused_call(pipeline)  # type: ignore[arg-type]
            with pytest.raises(errors.InvalidJob, match=r"as in client\.workflow\("):
                client.output(pipeline)  # type: ignore[arg-type]

    anyio.run(scenario)
