"""Workflows through the client on a real store, run inline by ``taskq.testing``.

What a submit writes (jobs, dependencies, one request), the read and steer
operations of both clients, and whole pipelines run job after job in this
process: parents' results and spawns through the same file and report a
worker uses.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

import taskq
import taskq.testing
from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.records import Fenced, JobEdge, JobState, WorkflowSubmission
from tests.support.reports import completed, report_one
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.workflow_jobs import (
    add,
    fail,
    outcomes,
    plus_parent,
    spawn_mistake,
    spawn_squares,
    square,
    total,
)

TOTAL = "tests.support.workflow_jobs:total"


@pytest.fixture
def client() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(submitter="test") as opened:
        yield opened


def test_a_map_and_its_fan_in_run_inline_and_the_fan_in_sums_its_parents(
    client: taskq.Client,
) -> None:
    flow = square.map(range(1, 6)).then(total)
    handle = client.submit_workflow(flow, name="squares")
    assert len(handle.job_ids) == 6
    ran = taskq.testing.run_due(client)
    assert ran == list(handle.job_ids)  # the fan-in last, once every square has ended
    assert handle.result(timeout=0) == {
        "sum": 1 + 4 + 9 + 16 + 25,
        "count": 5,
        "in_order": True,
        "parent_count": 5,
    }
    info = handle.wait(timeout=5)
    assert (info.name, info.submitter, info.counts[JobState.SUCCEEDED]) == ("squares", "test", 6)


def test_a_chain_hands_each_result_to_the_next(client: taskq.Client) -> None:
    flow = add.step(1, 2).then(plus_parent.step(10)).then(plus_parent.step(100))
    handle = client.submit_workflow(flow)
    taskq.testing.run_due(client)
    assert [job.result(timeout=0) for job in handle.jobs()] == [3, 13, 113]
    assert handle.result(timeout=0) == 113


def test_a_step_after_an_empty_map_waits_for_the_steps_before_the_map(
    client: taskq.Client,
) -> None:
    flow = add.step(1, 2).then(square.map([])).then(plus_parent.step(10))
    handle = client.submit_workflow(flow)
    first, last = handle.job_ids
    assert client.workflow_edges(handle.id) == [JobEdge(first, last)]
    assert client.get(last).state is JobState.WAITING
    assert taskq.testing.run_due(client) == [first, last]
    assert handle.result(timeout=0) == 13


def test_a_spawned_fan_out_joins_the_workflow_and_its_fan_in_sees_every_child(
    client: taskq.Client,
) -> None:
    handle = client.submit_workflow(spawn_squares.step(4))
    taskq.testing.run_due(client)
    assert handle.result(timeout=0) == "spawned 4"
    info = handle.wait(timeout=5)
    assert info.counts[JobState.SUCCEEDED] == 1 + 4 + 1
    jobs = client.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    assert len(jobs) == 6
    [fan_in] = [job for job in jobs if job.payload["target"].endswith(":total")]
    assert fan_in.result == {"sum": 0 + 1 + 4 + 9, "count": 4, "in_order": True, "parent_count": 4}
    spawner, *spawned = sorted(job.id for job in jobs)
    edges = client.workflow_edges(handle.id)
    assert [(edge.parent_id, edge.child_id) for edge in edges if edge.spawned] == [
        (spawner, child) for child in spawned
    ]
    assert client.relatives(fan_in.id).spawned_by == (spawner, JobState.SUCCEEDED)


def test_a_declared_job_given_bare_is_a_workflow_of_one_step(client: taskq.Client) -> None:
    handle = client.submit_workflow(total, name="alone")
    taskq.testing.run_due(client)
    assert handle.result(timeout=0)["count"] == 0
    assert handle.wait(timeout=5).name == "alone"


@pytest.mark.parametrize(
    ("kind", "message"),
    [("twice", "a job spawns once per attempt"), ("cycle", "a step cannot run after itself")],
)
def test_a_spawn_no_attempt_could_make_fails_the_job_at_once_spawning_nothing(
    client: taskq.Client, kind: str, message: str
) -> None:
    handle = client.submit_workflow(spawn_mistake.step(kind))
    taskq.testing.run_due(client, delayed=True)  # a retry, had there been one, runs too
    [job] = client.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    assert (job.state, job.attempts) == (JobState.FAILED, 1)
    assert job.error is not None
    assert job.error["message"].startswith(message)
    assert job.error["gave_up"] == "permanent"


def test_a_job_that_catches_a_refused_spawn_and_fails_is_retried(client: taskq.Client) -> None:
    handle = client.submit_workflow(spawn_mistake.step("caught"))
    taskq.testing.run_due(client, delayed=True)
    [job] = client.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    assert (job.state, job.attempts) == (JobState.DEAD, 3)


def test_a_failed_parent_cancels_its_child_unless_it_runs_anyway(client: taskq.Client) -> None:
    broken = fail.step()
    cancelled = total.step()
    anyway = outcomes.options(run_anyway=True).step()
    flow = taskq.group(broken.then(cancelled), taskq.group(square.step(2), broken).then(anyway))
    handle = client.submit_workflow(flow)
    taskq.testing.run_due(client)
    [cancelled_job] = handle.jobs(cancelled)
    assert cancelled_job.status() is JobState.CANCELLED
    [anyway_job] = handle.jobs(anyway)
    assert anyway_job.result(timeout=0) == [["succeeded", None], ["dead", "ValueError"]]
    with pytest.raises(errors.JobFailed):
        handle.result(timeout=0)


def test_a_parent_cancelled_by_hand_tells_a_run_anyway_child_why(client: taskq.Client) -> None:
    kept, dropped = square.step(2), square.step(3)
    anyway = outcomes.options(run_anyway=True).step()
    handle = client.submit_workflow(taskq.group(kept, dropped).then(anyway))
    [dropped_job] = handle.jobs(dropped)
    assert client.cancel(dropped_job.id).cancelled == (dropped_job.id,)
    taskq.testing.run_due(client)
    [anyway_job] = handle.jobs(anyway)
    assert anyway_job.result(timeout=0) == [["succeeded", None], ["cancelled", "Cancelled"]]
    assert client.get(dropped_job.id).error == {
        "type": "Cancelled",
        "message": "cancelled by request while queued",
    }


def test_after_on_a_single_submit_waits_for_the_jobs_named(client: taskq.Client) -> None:
    first = client.submit(square, 3)
    second = client.submit(square.options(after=[first]), 4)
    then = client.submit(
        "tests.support.workflow_jobs:total", after=[first, second.id], unchecked=True
    )
    assert [client.get(job.id).state for job in (second, then)] == [JobState.WAITING] * 2
    taskq.testing.run_due(client)
    assert then.result(timeout=0)["sum"] == 9 + 16
    with pytest.raises(errors.InvalidJob, match="after takes a list"):
        client.submit("tests.support.workflow_jobs:total", after=first, unchecked=True)  # type: ignore[arg-type]
    with pytest.raises(
        errors.InvalidJob, match=r"after takes a job's id, handle or record, not '1'"
    ):
        client.submit("tests.support.workflow_jobs:total", after=["1"], unchecked=True)  # type: ignore[list-item]


def test_after_refuses_a_workflow_saying_to_give_its_jobs_and_takes_each_kind_of_job(
    client: taskq.Client,
) -> None:
    pipeline = client.submit_workflow(square.map([2, 3]))
    written = len(client.list())
    refusals = [
        (pipeline, "a WorkflowHandle", "after=handle.job_ids"),
        (
            client.workflow(pipeline.id),
            "a WorkflowInfo",
            f"after=client.workflow_jobs({pipeline.id})",
        ),
    ]
    for workflow, kind, jobs in refusals:
        with pytest.raises(errors.InvalidJob) as refused:
            client.submit(TOTAL, after=[workflow], unchecked=True)
        assert str(refused.value) == (
            f"after takes a job's id, handle or record, not workflow {pipeline.id} ({kind}): "
            f"to run after a whole workflow, give its jobs, as in {jobs}"
        )
        assert refused.value.field == "after"
    with pytest.raises(errors.InvalidJob, match=r"after=handle\.job_ids"):
        total.options(after=[pipeline])
    with pytest.raises(errors.InvalidJob, match=r"workflow \d+ is already submitted"):
        square.step(1).then(pipeline)  # type: ignore[arg-type]
    assert len(client.list()) == written  # nothing was written
    first, second = pipeline.jobs()
    [second_brief] = [brief for brief in client.workflow_jobs(pipeline.id) if brief.id == second.id]
    after_all = client.submit(TOTAL, after=pipeline.job_ids, unchecked=True)
    by_handle_and_records = client.submit(
        TOTAL, after=[first, client.get(second.id)], unchecked=True
    )
    by_brief = client.submit(TOTAL, after=[first.id, second_brief], unchecked=True)
    for job in (after_all, by_handle_and_records, by_brief):
        assert [parent for parent, _ in client.relatives(job.id).parents] == list(pipeline.job_ids)
    taskq.testing.run_due(client)
    assert after_all.result(timeout=0)["sum"] == 4 + 9


def test_a_workflow_is_one_write_its_key_returns_it_and_bad_input_writes_nothing(
    client: taskq.Client,
) -> None:
    flow = square.map([1, 2]).then(total)
    handle = client.submit_workflow(flow, idempotency_key="batch-1")
    again = client.submit_workflow(flow, idempotency_key="batch-1")
    assert (again.id, again.job_ids) == (handle.id, handle.job_ids)
    with pytest.raises(errors.IdempotencyConflict):
        client.submit_workflow(square.map([3]), idempotency_key="batch-1")
    too_big = taskq.step("tests.support.workflow_jobs:add", "x" * 2_000_000)
    with pytest.raises(errors.InvalidJob):
        client.submit_workflow(square.step(1).then(too_big))
    with pytest.raises(errors.InvalidJob, match="at least one step"):
        client.submit_workflow(square.map([]))
    assert len(client.list()) == 3


def test_a_workflow_key_whose_job_key_a_lone_job_holds_is_refused_naming_both(
    client: taskq.Client,
) -> None:
    lone = client.submit(add.options(idempotency_key="solo/0"), 7, 7)
    refused = (
        rf"idempotency key 'solo/0' already names job {lone.id}, .* \(the workflow key "
        r"'solo' keys its jobs 'solo/0', 'solo/1', \.\.\.: give the workflow another key\)"
    )
    with pytest.raises(errors.IdempotencyConflict, match=refused):
        client.submit_workflow(add.step(7, 7), idempotency_key="solo")
    assert [job.id for job in client.list()] == [lone.id]
    assert client.submit_workflow(add.step(7, 7), idempotency_key="solo-2").job_ids


def test_the_read_and_steer_operations(client: taskq.Client) -> None:
    start = add.step(1)
    flow = taskq.group(start.then(square.step(2)), start.then(square.step(3))).then(total)
    handle = client.submit_workflow(flow, name="diamond")
    a, b, c, d = handle.job_ids
    assert client.workflow_edges(handle.id) == [
        JobEdge(a, b),
        JobEdge(a, c),
        JobEdge(b, d),
        JobEdge(c, d),
    ]
    relatives = client.relatives(d)
    assert relatives.parents == ((b, JobState.WAITING), (c, JobState.WAITING))
    assert client.cancel_workflow(handle.id) == 4
    assert handle.info().counts[JobState.CANCELLED] == 4
    assert handle.retry() >= 1
    taskq.testing.run_due(client)
    assert handle.result(timeout=0)["count"] == 2
    with pytest.raises(errors.WorkflowNotFound):
        client.workflow(handle.id + 1000)


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url


def test_the_async_client_submits_and_waits_for_a_workflow(store_url: str) -> None:
    async def main() -> None:
        async with taskq.AsyncClient(store_url, submitter="async") as client:
            handle = await client.submit_workflow(square.map([1, 2]).then(total))
            assert isinstance(handle, taskq.AsyncWorkflowHandle)
            info = await client.workflow(handle.id)
            assert info.counts[JobState.WAITING] == 1
            assert [edge.child_id for edge in await client.workflow_edges(handle.id)] == [
                handle.job_ids[2]
            ] * 2
            assert await handle.cancel() == 3
            assert (await handle.wait(timeout=5)).counts[JobState.CANCELLED] == 3
            alone = await client.submit_workflow(total)  # a declared job given bare: one step
            assert len(alone.job_ids) == 1

    anyio.run(main)


def test_after_takes_an_async_job_handle_and_refuses_an_async_workflow_handle(
    store_url: str,
) -> None:
    queue = f"after-{uuid.uuid4().hex[:10]}"  # the rqlite cluster is shared

    async def main() -> None:
        async with taskq.AsyncClient(store_url, submitter="async") as client:
            pipeline = await client.submit_workflow(square.options(queue=queue).map([1]))
            written = len(await client.list(taskq.JobQuery(queue=queue)))
            with pytest.raises(errors.InvalidJob) as refused:
                await client.submit(TOTAL, after=[pipeline], queue=queue, unchecked=True)
            assert f"not workflow {pipeline.id} (an AsyncWorkflowHandle)" in str(refused.value)
            assert len(await client.list(taskq.JobQuery(queue=queue))) == written
            [first] = await pipeline.jobs()
            later = await client.submit(TOTAL, after=[first], queue=queue, unchecked=True)
            assert (await client.relatives(later.id)).parents == ((first.id, JobState.QUEUED),)

    anyio.run(main)


def test_a_retry_names_the_jobs_it_brought_back_beside_those_it_retried(store_url: str) -> None:
    with taskq.Client(store_url, submitter="test") as client:
        flow = add.step(1, 2).then(plus_parent.step(10)).then(plus_parent.step(100))
        root, child, grandchild = client.submit_workflow(flow).job_ids
        client.cancel(root)  # cancels the two after it, as a failure would
        moved = client.retry(root)
        assert moved == [root]  # a list of the ids retried, as before
        assert moved.revived == (child, grandchild)
        states = [client.get(job).state for job in (root, child, grandchild)]
        assert states == [JobState.QUEUED, JobState.WAITING, JobState.WAITING]
        client.cancel(grandchild)  # by hand: no job waits on it
        again = client.retry(grandchild)
        assert (again, again.revived) == ([grandchild], ())


def _spawn_two(client: taskq.Client, queue: str) -> None:
    """Run the queue's one due job as a stand-in worker would: it spawns two jobs."""
    [job] = plan.run(client.store, job_claim("stand-in", [queue], limit=1, lease_seconds=60))
    spawn = WorkflowSubmission(jobs=tuple(taskq.call_spec("m:f", [n], queue=queue) for n in (1, 2)))
    report = msgspec.structs.replace(completed(job.lease, 3), spawn=spawn)
    assert plan.run(client.store, report_one(report)) is Fenced.ACCEPTED


def test_a_workflows_jobs_are_every_job_it_has_now_spawned_ones_included(store_url: str) -> None:
    queue = f"spawns-{uuid.uuid4().hex[:10]}"  # the rqlite cluster is shared
    with taskq.Client(store_url, submitter="test") as client:
        first = add.options(queue=queue).step(1, 2)
        handle = client.submit_workflow(first.then(square.options(queue=queue).step(3)))
        _spawn_two(client, queue)
        spawner, last = handle.job_ids
        spawned = [job_id for job_id, _ in client.relatives(spawner).spawned]
        assert len(spawned) == 2
        assert [job.id for job in handle.jobs()] == sorted([spawner, last, *spawned])
        assert [job.id for job in handle.jobs(first)] == [spawner]  # a part: its steps only


def test_an_async_workflows_jobs_are_every_job_it_has_now(store_url: str) -> None:
    queue = f"spawns-{uuid.uuid4().hex[:10]}"
    first = add.options(queue=queue).step(1, 2)

    async def main() -> None:
        async with taskq.AsyncClient(store_url, submitter="async") as client:
            handle = await client.submit_workflow(first.then(total.options(queue=queue)))
            with taskq.Client(store_url) as blocking:
                _spawn_two(blocking, queue)
            every = [job.id for job in await handle.jobs()]
            assert len(every) == 4
            assert every[:2] == list(handle.job_ids)
            assert every == sorted(every)
            assert [job.id for job in await handle.jobs(first)] == [handle.job_ids[0]]

    anyio.run(main)


def test_a_declared_job_given_bare_in_jobs_is_the_flows_one_step_without_arguments(
    client: taskq.Client,
) -> None:
    handle = client.submit_workflow(square.map([1, 2]).then(total))
    assert [job.id for job in handle.jobs(total)] == [handle.job_ids[-1]]
    # No step of it: another call of the job (its options, its arguments), or by name
    # (another job's declaration), or no job at all.
    for other, named in (
        (total.options(queue="elsewhere"), r"total\(\)"),
        (add, "add given bare"),
        (TOTAL, r"total\(\)"),
        (42, r"42 \(an int\)"),
    ):
        with pytest.raises(errors.InvalidJob, match=f"^{named} is not a step of this flow") as no:
            handle.jobs(other)
        assert no.value.field == "step"
    # Given bare twice, it is two jobs: which one is meant, only a step of its own says.
    twice = client.submit_workflow(taskq.group(total, add.step(1).then(total)))
    with pytest.raises(errors.InvalidJob, match=r"^total\(\) is 2 steps of this flow"):
        twice.jobs(total)

    async def main() -> None:
        async with taskq.AsyncClient(client.store.url) as on_async:
            again = await on_async.submit_workflow(add.step(1).then(total))
            assert [job.id for job in await again.jobs(total)] == [again.job_ids[-1]]
            with pytest.raises(errors.InvalidJob, match="is not a step of this flow"):
                await again.jobs(square)

    anyio.run(main)


def test_a_new_workflows_step_after_a_stored_job_is_refused_saying_what_to_do(
    client: taskq.Client,
) -> None:
    stored = client.submit(square, 2)
    flow = add.step(1, 2).then(total.options(after=[stored]).step())
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit_workflow(flow)
    message = str(refused.value)
    assert f"not on stored jobs [{stored.id}] (a step's after=)" in message
    assert "or the step that waits for them on its own, with after=" in message
    assert "workflow_id" not in message  # no option of the public API
    assert client.workflows() == []
