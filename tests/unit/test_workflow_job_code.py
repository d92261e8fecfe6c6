"""A job's code and its workflow: parents' results read from a file, spawns sent with success.

In real children of both isolation modes, and in ``taskq.testing.as_job``;
no store (the worker's side is in ``tests/acceptance/test_worker_workflows.py``).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import taskq
import taskq.testing
from taskq import errors
from taskq.broker.limits import Limits
from taskq.broker.records import (
    ClaimedJob,
    JobState,
    Lease,
    ParentResult,
    PayloadKind,
    WorkflowSubmission,
)
from taskq.broker.worker_policy import Policy
from taskq.job_context import MAX_SPAWN_JOBS, JobContext, NamedStep
from taskq.worker import parent_results
from taskq.worker.parent_results import PAGE, with_parents
from taskq.worker.running import RunningJob
from taskq.worker.sandbox import parents_file, protocol
from taskq.worker.sandbox.outcome import Outcome, Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.protocol import JobIdentity
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from tests.support.workflow_jobs import spawn_squares, square, total

JOBS = "tests.support.workflow_jobs"
PREPARER = JobPreparer(policy=Policy(modules=("tests.support",)))
LIMITS = Limits(memory_bytes=256 << 20, cpu_seconds=5, wall_seconds=20)


@pytest.fixture(params=["process", "pool"])
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    kind = Sandbox if request.param == "process" else PoolSandbox
    made = kind(preparer=PREPARER)
    try:
        yield made
    finally:
        await made.aclose()


def write_parents(path: Path, parents: list[ParentResult]) -> str:
    path.write_bytes(parents_file.encode(parents))
    return str(path)


async def run(sandbox: Sandbox, function: str, *args: Any, **identity: Any) -> Outcome:
    request = PREPARER.request(
        CallPayload(f"{JOBS}:{function}", list(args)), LIMITS, JobIdentity(id=7, **identity)
    )
    assert not isinstance(request, Outcome)
    return await sandbox.finish(await sandbox.start(request))


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_fan_in_reads_every_parent_from_the_file_in_order(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    count = 2_500  # more than a page of the worker's, one line each
    parents = [ParentResult(i, 100 + i, JobState.SUCCEEDED, i) for i in range(count)]
    path = write_parents(tmp_path / "parents.jsonl", parents)
    outcome = await run(sandbox, "total", parent_count=count, parents_file=path)
    assert outcome.status is Status.SUCCEEDED, outcome.error
    assert outcome.result == {
        "sum": sum(range(count)),
        "count": count,
        "in_order": True,
        "parent_count": count,
    }
    assert outcome.spawn is None


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_fan_in_reads_the_parents_sent_with_its_request_in_order(
    sandbox: Sandbox,
) -> None:
    parents = tuple(ParentResult(i, 100 + i, JobState.SUCCEEDED, i) for i in range(5))
    outcome = await run(sandbox, "total", parent_count=5, parents=parents)
    assert outcome.status is Status.SUCCEEDED, outcome.error
    assert outcome.result == {"sum": 10, "count": 5, "in_order": True, "parent_count": 5}
    error = {"type": "ValueError", "message": "on purpose", "traceback": ""}
    failed = (
        ParentResult(0, 1, JobState.SUCCEEDED, 4),
        ParentResult(1, 2, JobState.DEAD, error=error),
    )
    outcome = await run(sandbox, "outcomes", parent_count=2, parents=failed)
    assert outcome.result == [["succeeded", None], ["dead", "ValueError"]]


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_parent_that_failed_comes_with_its_state_and_error(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    error = {"type": "ValueError", "message": "on purpose", "traceback": ""}
    parents = [
        ParentResult(0, 1, JobState.SUCCEEDED, 4),
        ParentResult(1, 2, JobState.DEAD, error=error),
    ]
    path = write_parents(tmp_path / "parents.jsonl", parents)
    outcome = await run(sandbox, "outcomes", parent_count=2, parents_file=path)
    assert outcome.result == [["succeeded", None], ["dead", "ValueError"]]


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_spawn_comes_back_with_the_success_and_only_with_it(sandbox: Sandbox) -> None:
    outcome = await run(sandbox, "spawn_squares", 3)
    assert outcome.status is Status.SUCCEEDED, outcome.error
    assert outcome.spawn is not None
    assert outcome.spawn.parents == ((), (), (), (0, 1, 2))
    assert [job.payload["args"] for job in outcome.spawn.jobs] == [[0], [1], [2], []]
    assert outcome.spawn.workflow_id is None
    assert outcome.spawn_by_name == ()  # declared jobs' steps: nothing for the worker to resolve
    failed = await run(sandbox, "spawn_then_fail", 2)
    assert failed.status is Status.ERROR
    assert failed.spawn is None


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_spawn_says_which_steps_were_given_by_name_and_their_options(
    sandbox: Sandbox,
) -> None:
    outcome = await run(sandbox, "spawn_by_name", f"{JOBS}:cube", [3], {"priority": 2})
    assert outcome.status is Status.SUCCEEDED, outcome.error
    assert outcome.spawn is not None
    assert [job.payload["target"] for job in outcome.spawn.jobs] == [
        f"{JOBS}:square",
        f"{JOBS}:cube",
    ]
    assert outcome.spawn_by_name == (NamedStep(1, "step cube(3)", ("priority",)),)
    unchecked = await run(sandbox, "spawn_by_name", f"{JOBS}:cube", [3], {"unchecked": True})
    assert unchecked.spawn is not None
    assert unchecked.spawn_by_name == ()


def test_as_job_gives_the_parents_and_keeps_the_spawn() -> None:
    with taskq.testing.as_job(parent_results=[3, 4, 5]) as job:
        assert total() == {"sum": 12, "count": 3, "in_order": True, "parent_count": 3}
        assert spawn_squares(2) == "spawned 2"
    assert isinstance(job.spawned, WorkflowSubmission)
    assert len(job.spawned.jobs) == 3
    with pytest.raises(RuntimeError, match="only available inside a running job"):
        taskq.current_job()


def test_a_job_spawns_once_within_its_bounds() -> None:
    context = JobContext(id=1, attempt=1, queue="q", max_attempts=1)
    context.spawn(square.map([]))  # nothing to spawn: not a spawn
    assert context.spawned is None
    with pytest.raises(ValueError, match=f"at most {MAX_SPAWN_JOBS} jobs"):
        context.spawn(square.map(range(MAX_SPAWN_JOBS + 1)))
    context.spawn(square.map([1]).then(total))
    with pytest.raises(RuntimeError, match="once per attempt"):
        context.spawn(square.step(2))
    assert list(context.parent_results()) == []


def test_a_spawned_chain_through_an_empty_map_keeps_its_order() -> None:
    context = JobContext(id=1, attempt=1, queue="q", max_attempts=1)
    context.spawn(square.step(1).then(square.map([])).then(total))
    assert isinstance(context.spawned, WorkflowSubmission)
    assert context.spawned.parents == ((), (0,))


def test_a_declared_job_given_bare_spawns_as_its_step_without_arguments() -> None:
    with taskq.testing.as_job() as job:
        taskq.current_job().spawn(total)
    assert isinstance(job.spawned, WorkflowSubmission)
    assert [spawned.payload["target"] for spawned in job.spawned.jobs] == [f"{JOBS}:total"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "error", "give_up"),
    [
        ("twice", "RuntimeError", "permanent"),
        ("cycle", "taskq.errors.InvalidJob", "permanent"),
        ("caught", "RuntimeError", ""),  # the job's own failure, judged by its policy
    ],
)
async def test_a_spawn_no_attempt_could_make_fails_the_job_for_good(
    sandbox: Sandbox, kind: str, error: str, give_up: str
) -> None:
    outcome = await run(sandbox, "spawn_mistake", kind)
    assert (outcome.status, outcome.give_up, outcome.spawn) == (Status.ERROR, give_up, None)
    assert outcome.error is not None
    assert outcome.error["type"] == error


def test_a_child_cannot_spawn_into_another_workflow_or_with_a_failure() -> None:
    spawned = msgspec.to_builtins(square.map([1]).submission())
    body = {"status": "succeeded", "result_json": "1", "spawn": spawned}
    report = protocol.parse_report(body)
    assert report.spawn is not None
    assert report.spawn.jobs[0].payload["args"] == [1]
    for bad in (
        {**body, "spawn": {**spawned, "workflow_id": 5}},
        {**body, "spawn": {**spawned, "jobs": []}},
        {**body, "spawn": {"jobs": "no"}},
        {**body, "status": "error", "error": {"type": "E", "message": "", "traceback": ""}},
    ):
        with pytest.raises(protocol.ProtocolError, match="spawn"):
            protocol.parse_report(bad)


def test_a_spawn_s_steps_by_name_must_each_name_a_call_of_it() -> None:
    flow = taskq.group(square.step(1), taskq.step(f"{JOBS}:cube", 2, queue="q"))
    spawned = msgspec.to_builtins(flow.submission())
    step = {"position": 1, "where": "step cube(2)", "options": ["queue"]}
    body = {"status": "succeeded", "result_json": "1", "spawn": spawned, "spawn_by_name": [step]}
    assert protocol.parse_report(body).spawn_by_name == (NamedStep(1, "step cube(2)", ("queue",)),)
    python_exec = msgspec.to_builtins(taskq.python_exec_spec("def f(): pass", "f"))
    for bad in (
        {**body, "spawn": None},
        {**body, "spawn_by_name": [{**step, "position": 2}]},
        {**body, "spawn_by_name": [step, step]},
        {**body, "spawn_by_name": [{**step, "options": ["payload"]}]},
        {**body, "spawn_by_name": [{**step, "position": "1"}]},
        {**body, "spawn": {**spawned, "jobs": [spawned["jobs"][0], python_exec]}},
    ):
        with pytest.raises(protocol.ProtocolError, match="spawn"):
            protocol.parse_report(bad)


@pytest.mark.anyio
async def test_parents_that_cannot_be_read_fail_the_attempt_and_leave_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    request = PREPARER.request(CallPayload(f"{JOBS}:total", []), LIMITS, JobIdentity(id=7))
    assert not isinstance(request, Outcome)
    running = RunningJob(job=_claimed(7), renewed_at=0.0)

    # The store's operation stands for itself: each run asks for the page after a position.
    def page_after(job_id: int, *, after_position: int, limit: int) -> int:
        assert (job_id, limit) == (7, PAGE)
        return after_position

    monkeypatch.setattr(parent_results, "job_parent_results", page_after)

    async def unavailable(after_position: int) -> list[ParentResult]:
        raise errors.StoreUnavailable("no store")

    outcome = await with_parents(request, running, unavailable)
    assert isinstance(outcome, Outcome)
    assert outcome.status is Status.ERROR
    assert "parents' results could not be read" in (outcome.error or {})["message"]
    assert running.parents_file is None
    assert list(tmp_path.iterdir()) == []

    pages = [
        [ParentResult(i, i, JobState.SUCCEEDED, i) for i in range(PAGE)],
        [ParentResult(PAGE, PAGE, JobState.SUCCEEDED, PAGE)],
    ]
    asked: list[Any] = []

    async def store(after_position: int) -> list[ParentResult]:
        asked.append(after_position)
        return pages[len(asked) - 1]

    prepared = await with_parents(request, running, store)
    assert not isinstance(prepared, Outcome)
    assert asked == [-1, PAGE - 1]
    assert prepared.job.parents_file == running.parents_file
    assert [parent.position for parent in parents_file.read(str(running.parents_file))] == list(
        range(PAGE + 1)
    )
    running.drop_parents_file()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
@pytest.mark.parametrize("handed_over", [PAGE + 1, 3])
async def test_the_parents_handed_over_with_the_claim_are_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed_over: int
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    request = PREPARER.request(CallPayload(f"{JOBS}:total", []), LIMITS, JobIdentity(id=7))
    assert not isinstance(request, Outcome)
    parents = [ParentResult(i, 100 + i, JobState.SUCCEEDED, i) for i in range(PAGE + 1)]
    job = msgspec.structs.replace(_claimed(7), first_parents=tuple(parents[:handed_over]))
    running = RunningJob(job=job, renewed_at=0.0)
    monkeypatch.setattr(
        parent_results,
        "job_parent_results",
        lambda job_id, *, after_position, limit: after_position,
    )
    asked: list[int] = []

    async def store(after_position: int) -> list[ParentResult]:
        asked.append(after_position)
        return parents[after_position + 1 :][:PAGE]

    prepared = await with_parents(request, running, store)
    assert not isinstance(prepared, Outcome)
    if handed_over == len(parents):
        # All of them came: they go with the request, and no file is made.
        assert asked == []
        assert prepared.job.parents == tuple(parents)
        assert prepared.job.parents_file is None
        assert running.parents_file is None
        assert list(tmp_path.iterdir()) == []
    else:
        assert asked == [handed_over - 1]
        assert prepared.job.parents is None
        assert list(parents_file.read(str(running.parents_file))) == parents
        running.drop_parents_file()


def _claimed(job_id: int) -> ClaimedJob:
    return ClaimedJob(
        lease=Lease(job_id, "token"),
        kind=PayloadKind.CALL,
        payload={"target": f"{JOBS}:total", "args": [], "kwargs": {}},
        queue="q",
        attempt=1,
        max_attempts=1,
        timeout=None,
        limits={},
        lease_until=0.0,
        parent_count=PAGE + 1,
    )
