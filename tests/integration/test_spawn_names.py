"""A running job's spawn by name, resolved by the worker before its report: on both stores.

The child has no store, so the steps it spawns by name come to the worker
as written, marked; ``taskq.worker.spawn_names`` resolves them as
``client.submit_workflow`` would, or fails the attempt for good. Workers are
stood in for by their writes (tests/support/declared_store.py); the same
resolution run inline by ``taskq.testing`` writes the jobs, or nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import taskq
import taskq.testing
from taskq import errors
from taskq.broker.ops.leases import ReportKind
from taskq.broker.records import ClaimedJob, JobState, Lease, PayloadKind
from taskq.job_context import JobContext
from taskq.worker.reports import report_of
from taskq.worker.sandbox.outcome import Outcome, Status
from taskq.worker.spawn_names import SpawnNames
from taskq.worker.store_runner import store_runner
from tests.support.declared_store import client, declared
from tests.support.workflow_jobs import spawn_by_name, spawn_refused_by_store, square

__all__ = ["client"]  # the fixture

JOBS = "tests.support.workflow_jobs"


def _spawned(flow: taskq.Flow) -> Outcome:
    """The outcome of an attempt that succeeded and spawned ``flow``, as its child sends it."""
    context = JobContext(id=1, attempt=1, queue="q", max_attempts=1)
    context.spawn(flow)
    assert context.spawned is not None
    return Outcome(
        Status.SUCCEEDED,
        result_json="1",
        spawn=context.spawned,  # type: ignore[arg-type]
        spawn_by_name=context.spawned_by_name,
    )


def _report(outcome: Outcome) -> Any:
    job = ClaimedJob(Lease(1, "t"), PayloadKind.CALL, {"target": "m:f"}, "q", 1, 3, None, {}, 0.0)
    return report_of(job, None, outcome)


@pytest.mark.anyio
async def test_a_spawned_step_by_name_lands_as_declared_and_given_options_win(
    client: taskq.Client,
) -> None:
    name, queue, _ = declared(client, max_attempts=5, timeout=30.0, priority=4)
    flow = taskq.group(square.step(2), taskq.step(name, "a.txt", priority=9))
    outcome = _spawned(flow)
    assert len(outcome.spawn_by_name) == 1
    resolved = await SpawnNames(store_runner(client.store)).resolved(outcome)
    assert resolved.status is Status.SUCCEEDED
    assert resolved.spawn_by_name == ()
    assert resolved.spawn is not None
    assert outcome.spawn is not None
    declared_square, by_name = resolved.spawn.jobs
    assert declared_square == outcome.spawn.jobs[0]
    assert (by_name.queue, by_name.max_attempts, by_name.timeout, by_name.priority) == (
        queue,
        5,
        30.0,
        9,
    )
    assert by_name.payload == {"target": name, "args": ["a.txt"], "kwargs": {}}
    assert resolved.spawn.parents == outcome.spawn.parents
    assert _report(resolved).kind is ReportKind.COMPLETE


@pytest.mark.anyio
async def test_an_unknown_name_or_a_bad_call_fails_the_attempt_for_good_spawning_nothing(
    client: taskq.Client,
) -> None:
    name, _, misspelt = declared(client)
    spawn_names = SpawnNames(store_runner(client.store))
    unknown = await spawn_names.resolved(_spawned(taskq.step(misspelt, "a.txt")))
    assert (unknown.status, unknown.spawn, unknown.result_json) == (Status.ERROR, None, None)
    assert unknown.error is not None
    assert unknown.error["type"] == "taskq.errors.UnknownFunction"
    # The shared cluster holds other tests' names too: ours is among the suggestions.
    message = unknown.error["message"]
    assert message.startswith(
        f"its spawn was refused, nothing was spawned: step count_word('a.txt'): "
        f"no worker has declared {misspelt}; did you mean "
    )
    assert name in message.partition("did you mean ")[2].partition("?")[0].split(" or ")
    # The way out a spawn has, not a submit's (--unchecked, or over HTTP).
    assert message.endswith("to spawn it for workers yet to start, give its step unchecked=True)")
    report = _report(unknown)
    assert (report.kind, report.retryable, report.spawn) == (ReportKind.FAIL, False, None)

    bad_call = await spawn_names.resolved(_spawned(taskq.step(name, kwargs={"lower": False})))
    assert bad_call.error is not None
    assert bad_call.error["type"] == "taskq.errors.InvalidJob"
    assert "missing a required argument: 'path'" in bad_call.error["message"]
    assert _report(bad_call).retryable is False


def test_a_step_unchecked_is_not_resolved(client: taskq.Client) -> None:
    _, _, misspelt = declared(client)
    outcome = _spawned(taskq.step(misspelt, "a.txt", unchecked=True))
    assert outcome.spawn_by_name == ()
    assert outcome.spawn is not None
    assert outcome.spawn.jobs[0].queue == "default"


@pytest.mark.anyio
async def test_a_store_that_cannot_be_read_fails_the_attempt_to_be_retried() -> None:
    async def unavailable(op: Any) -> Any:
        op.close()
        raise errors.StoreUnavailable("no leader (on purpose)")

    outcome = _spawned(taskq.step(f"{JOBS}:cube", 2))
    failed = await SpawnNames(unavailable).resolved(outcome)
    assert (failed.status, failed.spawn, failed.give_up) == (Status.ERROR, None, "")
    assert failed.error is not None
    assert "could not be resolved, nothing was spawned: no leader" in failed.error["message"]
    report = _report(failed)
    assert (report.kind, report.retryable) == (ReportKind.FAIL, True)


@pytest.mark.anyio
async def test_a_declaration_stored_malformed_fails_the_attempt_for_good() -> None:
    async def malformed(op: Any) -> Any:
        op.close()
        raise ValueError("wrong parameter order")

    outcome = _spawned(taskq.step(f"{JOBS}:cube", 2))
    failed = await SpawnNames(malformed).resolved(outcome)
    assert (failed.status, failed.spawn, failed.give_up) == (Status.ERROR, None, "permanent")
    assert failed.error is not None
    assert "could not be resolved, nothing was spawned: wrong parameter" in failed.error["message"]


# -- inline, by taskq.testing: the same resolution, and what the store then holds ------------


@pytest.fixture
def inline() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(modules=[JOBS], submitter="test") as opened:
        yield opened


def _spawn(client: taskq.Client, target: str, **options: Any) -> taskq.WorkflowHandle:
    """Run a job that spawns a square and ``target`` by name; its workflow."""
    handle = client.submit_workflow(spawn_by_name.step(target, [3], options))
    taskq.testing.run_due(client, max_jobs=1)
    return handle


def test_inline_a_spawn_by_name_is_written_as_declared(inline: taskq.Client) -> None:
    handle = _spawn(inline, f"{JOBS}:cube", priority=2)
    assert handle.result(timeout=0) == "spawned"
    jobs = inline.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    [cube] = [job for job in jobs if job.payload["target"] == f"{JOBS}:cube"]
    assert (cube.queue, cube.max_attempts, cube.timeout, cube.priority) == ("flows", 4, 60.0, 2)
    taskq.testing.run_due(inline)
    assert inline.get(cube.id).result == 27


def test_inline_an_unknown_name_fails_the_job_and_writes_nothing(inline: taskq.Client) -> None:
    handle = _spawn(inline, f"{JOBS}:cubes")
    [job] = inline.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    assert job.state is JobState.FAILED
    assert job.error is not None
    assert job.error["message"].startswith(
        "its spawn was refused, nothing was spawned: step cubes(3)"
    )
    assert f"did you mean {JOBS}:cube " in job.error["message"]
    assert job.error["gave_up"] == "permanent"


def test_inline_an_unchecked_step_is_written_as_given(inline: taskq.Client) -> None:
    handle = _spawn(inline, f"{JOBS}:cube", unchecked=True)
    jobs = inline.list(taskq.JobQuery(workflow_id=handle.id, limit=10))
    [cube] = [job for job in jobs if job.payload["target"] == f"{JOBS}:cube"]
    assert (cube.queue, cube.timeout) == ("default", None)


def test_inline_a_spawn_the_store_refuses_at_the_report_fails_its_job_alone(
    inline: taskq.Client,
) -> None:
    # Inline runs make no check before the report: its write is where the store refuses,
    # as for a worker's spawn whose parent went between its check and its report.
    beside = inline.submit(square, 4)
    refused = inline.submit_workflow(spawn_refused_by_store.step("submitted"))
    assert taskq.testing.run_due(inline) == [beside.id, *refused.job_ids]
    assert beside.result(timeout=0) == 16
    [job] = inline.list(taskq.JobQuery(workflow_id=refused.id, limit=10))
    assert (job.state, job.attempts) == (JobState.FAILED, 1)
    assert job.error is not None
    assert job.error["type"] == "taskq.errors.InvalidJob"
    assert job.error["message"] == (
        "its spawn was refused, nothing was spawned: "
        f"no job has the id(s) [{2**62}] given as parents: never submitted, or pruned"
    )
    assert job.error["gave_up"] == "permanent"
    assert job.result is None
