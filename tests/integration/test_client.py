"""taskq.Client and taskq.AsyncClient on both stores and over HTTP, with a stand-in worker thread.

Each test runs on a fresh SQLite file, on the shared rqlite cluster, and
through a real ``taskq serve`` (over a SQLite file of its own): the same
methods, the same answers, the same errors. Where the HTTP client cannot do
what a test asks, the test is skipped saying so.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import taskq
from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations, plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.output import AttemptOutput, OutputChunk, output_append
from taskq.broker.records import (
    AttemptEnded,
    JobBrief,
    JobState,
    OutputText,
    Relatives,
    Retention,
    WorkflowStatus,
    WorkflowSubmission,
)
from taskq.broker.stores.store import Consistency, Statement, Store
from taskq.dev.server import ServerProcess, token_of
from tests.support.hinted_workers import register_worker
from tests.support.reports import completed, failed, report_one
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster

BACKENDS = [*STORE_KINDS, "http"]
NO_SUCH_JOB = 987_654_321
# For the tests of a client on a store of its own, which the HTTP client is not.
ON_A_STORE = pytest.mark.parametrize("backend", STORE_KINDS, indirect=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The store the client's requests end in (the stand-in worker claims from it)."""
    if backend == "http":
        url = request.getfixturevalue("served")[0]
    elif backend == "rqlite":
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        url = cluster.url
    else:
        url = f"sqlite://{tmp_path / 'taskq.db'}"
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def connect(backend: str, store: Store, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Makes a client of the backend's kind, Client or AsyncClient, submitting as 'tester'."""

    def make(kind: type[Any] = taskq.Client) -> Any:
        if backend == "http":
            server: ServerProcess = request.getfixturevalue("served")[1]
            return kind(server.url, token=token_of("tester"))
        return kind(store=store, submitter="tester")

    return make


@pytest.fixture
def client(connect: Callable[..., taskq.Client]) -> Iterator[taskq.Client]:
    made = connect()
    yield made
    if made.http is not None:
        made.close()  # a store's client leaves the store to its fixture


@pytest.fixture
def queue() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def _work_one(store: Store, queue: str, outcome: Callable[[Any], tuple[str, Any]]) -> None:
    """Claim one job of ``queue``; report ``outcome(payload)``, ("ok", value) or ("fail", error)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        claimed = plan.run(store, job_claim("stand-in", [queue], limit=1, lease_seconds=30))
        if claimed:
            kind, value = outcome(claimed[0].payload)
            if kind == "ok":
                plan.run(store, report_one(completed(claimed[0].lease, value)))
            else:
                plan.run(store, report_one(failed(claimed[0].lease, value, retryable=False)))
            return
        time.sleep(0.01)
    raise TimeoutError("no job to work on")


@pytest.fixture
def worker(store: Store) -> Iterator[Callable[..., threading.Thread]]:
    threads: list[threading.Thread] = []

    def start(queue: str, outcome: Callable[[Any], tuple[str, Any]]) -> threading.Thread:
        thread = threading.Thread(target=_work_one, args=(store, queue, outcome), daemon=True)
        thread.start()
        threads.append(thread)
        return thread

    yield start
    for thread in threads:
        thread.join(timeout=30)


def test_submit_and_wait_for_the_result(client: taskq.Client, queue: str, worker: Any) -> None:
    handle = client.submit("tests.support.jobs:add", 2, 3, queue=queue, unchecked=True)
    assert handle.status() is JobState.QUEUED
    worker(queue, lambda payload: ("ok", sum(payload["args"])))
    assert handle.result(timeout=20) == 5
    job = client.get(handle.id)
    assert (job.state, job.submitter, job.payload["target"]) == (
        JobState.SUCCEEDED,
        "tester",
        "tests.support.jobs:add",
    )


def test_a_failed_job_raises_with_its_error(client: taskq.Client, queue: str, worker: Any) -> None:
    handle = client.submit("m:f", queue=queue, unchecked=True)
    worker(
        queue,
        lambda payload: ("fail", {"type": "ZeroDivisionError", "message": "division by zero"}),
    )
    with pytest.raises(errors.JobFailed, match="ZeroDivisionError: division by zero") as caught:
        handle.result(timeout=20)
    assert caught.value.job.state is JobState.FAILED  # type: ignore[attr-defined]


def _chain_of_two(queue: str) -> taskq.Flow:
    return taskq.step("m:f", 1, queue=queue, unchecked=True).then(
        taskq.step("m:f", 2, queue=queue, unchecked=True)
    )


def test_a_workflow_wait_that_runs_out_says_when_no_worker_serves_its_queue(
    client: taskq.Client, store: Store, queue: str
) -> None:
    handle = client.submit_workflow(_chain_of_two(queue))
    with pytest.raises(errors.ResultTimeout) as unserved:
        client.wait_workflow(handle.id, timeout=0.2)
    assert str(unserved.value) == (
        f"workflow {handle.id} still has 2 job(s) to end after 0.2 s: no active worker "
        f"serves queue {queue!r} (start one: taskq-worker --queues {queue} --modules m)"
    )
    register_worker(store, f"{queue}-worker", [queue], None)
    with pytest.raises(errors.ResultTimeout) as served:
        client.wait_workflow(handle.id, timeout=0.2)
    assert str(served.value) == f"workflow {handle.id} still has 2 job(s) to end after 0.2 s"


def test_a_retry_its_parent_would_cancel_again_is_refused_and_moves_nothing(
    client: taskq.Client, queue: str, worker: Any
) -> None:
    handle = client.submit_workflow(_chain_of_two(queue))
    root, child = handle.job_ids
    worker(queue, lambda payload: ("fail", {"type": "E", "message": "no"})).join(timeout=30)
    assert client.get(child).state is JobState.CANCELLED
    with pytest.raises(
        errors.WrongState, match=f"^job {child} not retried: it waits for job {root}"
    ):
        client.retry(child)
    assert [client.get(job_id).state for job_id in (root, child)] == [
        JobState.FAILED,
        JobState.CANCELLED,
    ]
    assert client.retry(root, child) == [root, child]


def test_waiting_has_a_bound_and_says_when_no_worker_could_end_it(
    client: taskq.Client, store: Store, queue: str
) -> None:
    handle = client.submit("m:f", queue=queue, unchecked=True)
    with pytest.raises(errors.ResultTimeout) as unserved:
        handle.result(timeout=0.2)
    assert str(unserved.value) == (
        f"job {handle.id} is still queued after 0.2 s: no active worker serves queue "
        f"{queue!r} (start one: taskq-worker --queues {queue} --modules m)"
    )
    register_worker(store, f"{queue}-worker", [queue], None)
    with pytest.raises(errors.ResultTimeout) as served:
        handle.result(timeout=0.2)
    # A worker that could take it: only busy, so the error guesses no further.
    assert str(served.value) == f"job {handle.id} is still queued after 0.2 s"


def test_cancel_list_stats_retry(client: taskq.Client, queue: str) -> None:
    handles = client.submit_many([taskq.call_spec("m:f", [i], queue=queue) for i in range(3)])
    assert handles[0].cancel().cancelled == (handles[0].id,)
    assert client.retry(handles[0].id) == [handles[0].id]
    client.cancel(handles[1].id)
    assert [
        job.id for job in client.list(taskq.JobQuery(queue=queue, state=JobState.CANCELLED))
    ] == [handles[1].id]
    # A state by a name none has: refused alike on a store and over HTTP.
    with pytest.raises(errors.InvalidJob, match="no job state 'bogus'"):
        client.list(taskq.JobQuery(queue=queue, state="bogus"))
    [stats] = [s for s in client.stats() if s.queue == queue]
    assert (stats.counts[JobState.QUEUED], stats.counts[JobState.CANCELLED]) == (2, 1)
    client.pause(queue)
    assert [s.paused for s in client.stats() if s.queue == queue] == [True]
    client.resume(queue)
    with pytest.raises(errors.JobNotFound):
        client.get(987_654_321)


def test_an_unknown_id_raises_and_the_ids_after_it_stay(client: taskq.Client, queue: str) -> None:
    queued, cancelled = client.submit_many(
        [taskq.call_spec("m:f", [i], queue=queue) for i in (1, 2)]
    )
    cancelled.cancel()
    unknown = f"^no job with id {NO_SUCH_JOB}$"
    for move, job_id in ((client.cancel, queued.id), (client.retry, cancelled.id)):
        with pytest.raises(errors.JobNotFound, match=unknown):
            move(NO_SUCH_JOB)
        with pytest.raises(errors.JobNotFound, match=unknown):
            move(NO_SUCH_JOB, job_id)
    assert (queued.status(), cancelled.status()) == (JobState.QUEUED, JobState.CANCELLED)


def test_an_unknown_id_anywhere_moves_none(client: taskq.Client, queue: str) -> None:
    queued, cancelled = client.submit_many(
        [taskq.call_spec("m:f", [i], queue=queue) for i in (1, 2)]
    )
    cancelled.cancel()
    with pytest.raises(errors.JobNotFound, match=f"^no job with id {NO_SUCH_JOB}$"):
        client.cancel(queued.id, NO_SUCH_JOB, NO_SUCH_JOB + 1)
    with pytest.raises(errors.JobNotFound, match=f"^no job with id {NO_SUCH_JOB}$"):
        client.retry(cancelled.id, NO_SUCH_JOB)
    assert (queued.status(), cancelled.status()) == (JobState.QUEUED, JobState.CANCELLED)


def test_a_listing_past_the_page_bounds_is_refused(client: taskq.Client, queue: str) -> None:
    client.submit("m:f", queue=queue, unchecked=True)
    for limit in (0, 1001, 5000):
        with pytest.raises(
            errors.InvalidJob, match=f"^limit must be from 1 to 1000, got {limit}$"
        ) as caught:
            client.list(taskq.JobQuery(queue=queue, limit=limit))
        assert caught.value.field == "limit"
        # A listing of workflows pages the same way, and refuses the same limits.
        with pytest.raises(errors.InvalidJob, match=f"^limit must be from 1 to 1000, got {limit}$"):
            client.workflows(limit=limit)
    assert len(client.list(taskq.JobQuery(queue=queue, limit=1000))) == 1
    assert len(client.workflows(limit=1000)) <= 1000


def test_a_workers_attempts_outlive_its_row_and_an_unknown_worker_is_named(
    client: taskq.Client, store: Store, queue: str
) -> None:
    worker_id = f"{queue}-worker"
    with pytest.raises(errors.WorkerNotFound, match=f"^no worker with id '{worker_id}'$"):
        client.worker_executions(worker_id)
    register_worker(store, worker_id, [queue], None)
    assert client.worker_executions(worker_id) == []
    handle = client.submit("m:f", queue=queue, unchecked=True)
    [claimed] = plan.run(store, job_claim(worker_id, [queue], limit=1, lease_seconds=30))
    plan.run(store, report_one(completed(claimed.lease, None)))
    # Pruned, as a stopped worker's row is before the attempts of its jobs.
    store.execute([Statement("DELETE FROM workers WHERE id = :id", {"id": worker_id})])
    [attempt] = client.worker_executions(worker_id)
    assert attempt.job_id == handle.id
    # A page past its last attempt is empty: the worker is known all the same.
    assert client.worker_executions(worker_id, before=attempt.id) == []


def test_queue_limits(client: taskq.Client, queue: str) -> None:
    client.submit_spec(taskq.call_spec("m:f", queue=queue))
    client.set_queue_limits(queue, max_running=2, rate_limit=10, rate_period=60)
    [stats] = [s for s in client.stats() if s.queue == queue]
    assert (stats.max_running, stats.rate_limit, stats.rate_period) == (2, 10, 60)
    client.set_queue_limits(queue, max_running=None, rate_period=60)  # the rate stays as it was
    [stats] = [s for s in client.stats() if s.queue == queue]
    assert (stats.max_running, stats.rate_limit, stats.rate_period) == (None, 10, 60)


def test_a_refused_setting_names_its_member(client: taskq.Client, queue: str) -> None:
    client.submit_spec(taskq.call_spec("m:f", queue=queue))
    with pytest.raises(errors.InvalidSetting, match=r"^max_running must be from 0 to") as caught:
        client.set_queue_limits(queue, max_running=-1)
    assert caught.value.field == "max_running"
    spec = taskq.call_spec("m:f", queue=queue)
    with pytest.raises(errors.InvalidSetting, match=r"^bad cron expression") as caught:
        client.add_schedule(f"bad-{queue}", spec, cron="99 * * * *", unchecked=True)
    assert caught.value.field == "cron"
    # A ConfigError still, as before it had a class of its own.
    assert isinstance(caught.value, errors.ConfigError)
    [stats] = [s for s in client.stats() if s.queue == queue]
    assert stats.max_running is None


def test_the_retention_is_set_read_and_refused_alike_everywhere(client: taskq.Client) -> None:
    day = 86400.0
    found = client.retention()
    try:
        assert client.set_retention(succeeded=day, failed=None) == Retention(day, None)
        assert client.set_retention(failed=90 * day) == Retention(day, 90 * day)
        with pytest.raises(errors.InvalidSetting, match="retention must be a positive") as caught:
            client.set_retention(succeeded=-1.0)
        assert caught.value.field == "succeeded_seconds"
        assert client.retention() == Retention(day, 90 * day)
        assert client.prune() >= 0  # by the store's retention: no figure given
    finally:
        client.set_retention(succeeded=found.succeeded_seconds, failed=found.failed_seconds)


def test_submit_limits(client: taskq.Client, queue: str) -> None:
    submitter = f"someone-{queue}"
    client.set_submit_limit(submitter, 100, 60)
    assert [(x.rate, x.period) for x in client.submit_limits() if x.submitter == submitter] == [
        (100, 60)
    ]
    client.remove_submit_limit(submitter)
    assert submitter not in {x.submitter for x in client.submit_limits()}


def test_schedules(client: taskq.Client, queue: str) -> None:
    name = f"every-{queue}"
    spec = taskq.call_spec("m:f", [1], queue=queue)  # no worker declares m:f: unchecked
    added = client.add_schedule(name, spec, every_seconds=3600, unchecked=True)
    assert (added.schedule.name, added.replaced) == (name, False)
    # The way out is the argument, on the store as over HTTP.
    with pytest.raises(errors.ScheduleExists, match=r"replace=True\), or remove it first$"):
        client.add_schedule(name, spec, every_seconds=60, unchecked=True)
    assert client.add_schedule(name, spec, every_seconds=60, replace=True, unchecked=True).replaced
    [kept] = [s for s in client.schedules() if s.name == name]
    assert (kept.spec["queue"], kept.catch_up) == (queue, "once")
    # The job's parts as values, as a job has them, whichever way the client reaches the store.
    labelled = taskq.call_spec("m:f", [1], queue=queue, labels=["gpu"], limits={"processes": 4})
    added = client.add_schedule(f"{name}-l", labelled, every_seconds=60, unchecked=True)
    [listed] = [s for s in client.schedules() if s.name == f"{name}-l"]
    for schedule in (added.schedule, listed):
        job = {part: schedule.spec[part] for part in ("payload", "limits", "labels")}
        assert job == {
            "payload": {"target": "m:f", "args": [1], "kwargs": {}},
            "limits": {"processes": 4},
            "labels": ["gpu"],
        }
    assert client.remove_schedule(f"{name}-l")
    by_name = taskq.NamedCall("m:g", (2,), {"queue": queue})
    with pytest.raises(errors.UnknownFunction):
        client.add_schedule(f"{name}-g", by_name, cron="0 3 * * *")
    assert client.add_schedule(f"{name}-g", by_name, cron="0 3 * * *", unchecked=True).schedule
    assert client.remove_schedule(f"{name}-g")
    assert client.pause_schedule(name)
    assert [s.paused for s in client.schedules() if s.name == name] == [True]
    assert client.resume_schedule(name)
    assert [s.paused for s in client.schedules() if s.name == name] == [False]
    assert client.remove_schedule(name)
    assert not client.remove_schedule(name)
    assert not client.pause_schedule(name)


def test_a_workflow_runs_parents_first_and_is_waited_for(
    client: taskq.Client, queue: str, worker: Any
) -> None:
    first = taskq.step("m:f", 1, queue=queue, unchecked=True)
    second = taskq.step("m:f", 2, queue=queue, unchecked=True)
    flow = taskq.group(first, second).then(taskq.step("m:f", 3, queue=queue, unchecked=True))
    handle = client.submit_workflow(flow, name=f"wf-{queue}", idempotency_key=f"wf-{queue}")
    again = client.submit_workflow(flow, name=f"wf-{queue}", idempotency_key=f"wf-{queue}")
    assert (again.id, again.job_ids) == (handle.id, handle.job_ids)
    assert [job.status() for job in handle.jobs()] == [
        JobState.QUEUED,
        JobState.QUEUED,
        JobState.WAITING,
    ]
    assert client.workflow_jobs(handle.id) == [
        JobBrief(job_id, state)
        for job_id, state in zip(
            handle.job_ids, (JobState.QUEUED, JobState.QUEUED, JobState.WAITING), strict=True
        )
    ]
    with pytest.raises(errors.WorkflowNotFound):
        client.workflow_jobs(987_654_321)
    with pytest.raises(errors.ResultTimeout, match="to end"):
        client.wait_workflow(handle.id, timeout=0.2)
    for _ in range(3):  # one claim at a time: the last becomes queued once both parents end
        worker(queue, lambda payload: ("ok", payload["args"][0] * 10)).join(timeout=30)
    assert handle.result(timeout=20) == 30
    info = handle.wait(timeout=20)
    assert info.counts.get(JobState.SUCCEEDED) == 3
    assert sorted((e.parent_id, e.child_id) for e in client.workflow_edges(handle.id)) == [
        (handle.job_ids[0], handle.job_ids[2]),
        (handle.job_ids[1], handle.job_ids[2]),
    ]


def test_a_jobs_relatives_are_read_alike_everywhere(
    connect: Callable[..., Any], client: taskq.Client, store: Store, queue: str
) -> None:
    first, second = client.submit_many([taskq.call_spec("m:f", [i], queue=queue) for i in (1, 2)])
    # Stored parents outside any workflow, in the order given, not by id.
    later = client.submit_spec(taskq.call_spec("m:f", [3], queue=queue, after=[second, first]))
    [claimed] = plan.run(store, job_claim("stand-in", [queue], limit=1, lease_seconds=30))
    assert claimed.lease.job_id == first.id
    spawn = WorkflowSubmission(jobs=(taskq.call_spec("m:f", [4], queue=queue),))
    report = msgspec.structs.replace(completed(claimed.lease, None), spawn=spawn)
    plan.run(store, report_one(report))
    [spawned] = [
        job.id
        for job in client.list(taskq.JobQuery(queue=queue))
        if job.id not in {first.id, second.id, later.id}
    ]
    assert client.relatives(later.id) == Relatives(
        parents=((second.id, JobState.QUEUED), (first.id, JobState.SUCCEEDED)), children=()
    )
    assert client.relatives(later.id, limit=1).parents == ((second.id, JobState.QUEUED),)
    assert client.relatives(first.id) == Relatives(
        parents=(), children=((later.id, JobState.WAITING),), spawned=((spawned, JobState.QUEUED),)
    )
    assert client.relatives(spawned) == Relatives(
        parents=(), children=(), spawned_by=(first.id, JobState.SUCCEEDED)
    )
    # A job alone has none; an id no job has is refused, as a read of the job is.
    assert client.relatives(second.id) == Relatives(
        parents=(), children=((later.id, JobState.WAITING),)
    )
    alone = client.submit("m:f", 5, queue=queue, unchecked=True)
    assert client.relatives(alone.id) == Relatives(parents=(), children=())
    with pytest.raises(errors.JobNotFound, match=f"^no job with id {NO_SUCH_JOB}$"):
        client.relatives(NO_SUCH_JOB)

    async def awaited() -> None:
        async with connect(taskq.AsyncClient) as async_client:
            assert await async_client.relatives(first.id) == client.relatives(first.id)
            with pytest.raises(errors.JobNotFound):
                await async_client.relatives(NO_SUCH_JOB)

    anyio.run(awaited)


def test_workflows_are_listed_newest_first_with_their_jobs_counted(
    client: taskq.Client, queue: str
) -> None:
    # A name of this test's own: the rqlite cluster and the server's store are shared.
    name = f"nightly-{queue}"

    def chain(*args: int) -> taskq.Flow:
        return taskq.step("m:f", args[0], queue=queue, unchecked=True).then(
            taskq.step("m:f", args[1], queue=queue, unchecked=True)
        )

    older = client.submit_workflow(chain(1, 2), name=name)
    other = client.submit_workflow(chain(3, 4), name=f"{name}-other")
    newer = client.submit_workflow(chain(5, 6), name=name)
    assert client.cancel_workflow(newer.id) == 2
    listed = client.workflows(name=name)
    assert [info.id for info in listed] == [newer.id, older.id]
    assert listed[0].counts[JobState.CANCELLED] == 2
    assert (listed[1].counts[JobState.QUEUED], listed[1].counts[JobState.WAITING]) == (1, 1)
    assert sum(listed[1].counts.values()) == 2
    assert listed == [client.workflow(newer.id), client.workflow(older.id)]
    # Pages: the last id seen as ``before``.
    assert [info.id for info in client.workflows(name=name, limit=1)] == [newer.id]
    assert [info.id for info in client.workflows(name=name, before=newer.id)] == [older.id]
    assert client.workflows(name=name, before=older.id) == []
    # Newest first across names too, and by submitter (the token's name over HTTP),
    # among the workflows other tests submit meanwhile.
    mine = client.workflows(submitter=listed[0].submitter, before=newer.id + 1, limit=1000)
    ours = {newer.id, other.id, older.id}
    assert [info.id for info in mine if info.id in ours] == [newer.id, other.id, older.id]
    assert client.workflows(name=name, submitter=f"nobody-{queue}") == []
    # By status: the cancelled one, the one still waiting to run.
    assert [info.status for info in listed] == [WorkflowStatus.CANCELLED, WorkflowStatus.RUNNING]
    assert [info.id for info in client.workflows(name=name, status="running")] == [older.id]
    cancelled = client.workflows(name=name, status=WorkflowStatus.CANCELLED)
    assert [info.id for info in cancelled] == [newer.id]
    assert client.workflows(name=name, status="failed") == []
    with pytest.raises(errors.InvalidJob, match="no workflow status 'done'"):
        client.workflows(name=name, status="done")


@ON_A_STORE  # a second client with a payload limit of its own, on the same store
def test_a_spec_is_checked_before_any_request(client: taskq.Client, queue: str) -> None:
    client.validate_spec(taskq.call_spec("m:f", queue=queue))
    with pytest.raises(errors.InvalidJob, match="priority"):
        client.validate_spec(taskq.call_spec("m:f", queue=queue, priority=2**40))
    small = taskq.Client(store=client.store, max_payload_bytes=100)
    with pytest.raises(errors.InvalidJob, match="over the limit of 100"):
        small.validate_spec(taskq.call_spec("m:f", ["x" * 200], queue=queue))
    assert client.list(taskq.JobQuery(queue=queue)) == []


def test_the_schema_version_is_the_newest_migration(client: taskq.Client) -> None:
    assert client.schema_version() == max(m.version for m in migrations.load_migrations())


def test_non_json_arguments_are_refused_and_nothing_is_written(
    client: taskq.Client, queue: str
) -> None:
    with pytest.raises(errors.InvalidJob, match="must be JSON"):
        client.submit("m:f", {"when": time}, queue=queue, unchecked=True)
    with pytest.raises(errors.InvalidJob, match=r"package\.module:function"):
        client.submit("m.f", queue=queue)
    assert client.list(taskq.JobQuery(queue=queue)) == []


def test_async_client_shares_the_behaviour(
    connect: Callable[..., taskq.AsyncClient], queue: str, worker: Any
) -> None:
    async def scenario() -> None:
        async with connect(taskq.AsyncClient) as client:
            handle = await client.submit(
                "m:f", 7, queue=queue, idempotency_key=f"once-{queue}", unchecked=True
            )
            again = await client.submit(
                "m:f", 7, queue=queue, idempotency_key=f"once-{queue}", unchecked=True
            )
            assert again.id == handle.id
            assert await handle.status() is JobState.QUEUED
            worker(queue, lambda payload: ("ok", payload["args"][0] * 6))
            assert await handle.result(timeout=20) == 42
            assert [e.outcome for e in await client.executions(handle.id)] == ["succeeded"]
            assert (await client.get(handle.id)).state is JobState.SUCCEEDED
            await client.pause(queue)
            assert [s.paused for s in await client.stats() if s.queue == queue] == [True]
            await client.resume(queue)
            assert isinstance(await client.workers(), list)

    anyio.run(scenario)


def test_the_async_client_reports_on_the_store(
    connect: Callable[..., taskq.AsyncClient], queue: str
) -> None:
    async def scenario() -> None:
        async with connect(taskq.AsyncClient) as client:
            handle = await client.submit("m:f", queue=queue, unchecked=True)
            assert [b.minutes_ago for b in await client.throughput(minutes=3)] == [2, 1, 0]
            # The shared cluster holds other tests' jobs, some finished at injected
            # store times: how many go is theirs to say; this one, just queued, stays.
            assert await client.prune(older_than=3600) >= 0
            assert (await client.get(handle.id)).state is JobState.QUEUED
            assert any(node.reachable for node in await client.nodes())

    anyio.run(scenario)


def _print_then_end(store: Store, queue: str, lines: list[str], started: threading.Event) -> None:
    """Claim the job of ``queue``, store ``lines`` as its output one write each, then end it."""
    deadline = time.monotonic() + 20
    while not (
        claimed := plan.run(store, job_claim("printer", [queue], limit=1, lease_seconds=30))
    ):
        assert time.monotonic() < deadline, "no job to print for"
        time.sleep(0.01)
    lease, at = claimed[0].lease, 0
    for line in lines:
        chunk = OutputChunk(at, len(line.encode()), line)
        plan.run(store, output_append([AttemptOutput(lease, (chunk,), 1 << 20)]))
        at += chunk.size
        started.wait(timeout=20)  # the rest once a follower is reading
    plan.run(store, report_one(completed(lease, None)))


def test_output_follows_a_job_that_prints_then_ends(
    client: taskq.Client, connect: Callable[..., taskq.AsyncClient], store: Store, queue: str
) -> None:
    handle = client.submit("m:f", queue=queue, unchecked=True)
    started = threading.Event()
    printer = threading.Thread(
        target=_print_then_end, args=(store, queue, ["one\n", "two\n"], started), daemon=True
    )
    printer.start()
    pieces = []
    for piece in client.output(handle.id, follow=True):
        pieces.append(piece)
        started.set()
    printer.join(timeout=20)
    texts = [(p.attempt, p.start, p.end, p.text) for p in pieces if isinstance(p, OutputText)]
    assert "".join(text for *_, text in texts) == "one\ntwo\n"
    assert texts[-1][2] == 8
    assert isinstance(pieces[-1], AttemptEnded)
    assert (pieces[-1].attempt, pieces[-1].job_state) == (1, JobState.SUCCEEDED)
    # Stored, not followed: from a byte on; and the async iterator reads the same.
    stored = list(client.output(handle.id, start=4))
    assert [p.text for p in stored if isinstance(p, OutputText)] == ["two\n"]

    async def read_async() -> list[Any]:
        async with connect(taskq.AsyncClient) as aclient:
            return [piece async for piece in aclient.output(handle.id, start=4)]

    with pytest.raises(errors.AttemptNotFound):
        list(client.output(handle.id, attempt=2))
    assert anyio.run(read_async) == stored  # last: leaving it closes a store's client


@ON_A_STORE  # the caller's clock against the store's: over HTTP the caller is the server
def test_a_callers_clock_an_hour_off_changes_no_lease(
    store: Store, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)
    plan.run(store, job_enqueue([taskq.call_spec("m:f", queue=queue)]))
    [claimed] = plan.run(store, job_claim("skewed", [queue], limit=1, lease_seconds=30))
    [clock] = store.query(
        Statement("SELECT now FROM taskq_clock"), consistency=Consistency.LINEARIZABLE
    )
    assert claimed.lease_until == pytest.approx(clock["now"] + 30, abs=1)
    assert abs(claimed.lease_until - (real_time() + 30)) < 5
    # Requeue runs on the store's clock: this job's lease has not run out.
    swept = plan.run(store, job_requeue_expired())
    assert claimed.lease.job_id not in {*swept.requeued, *swept.dead, *swept.cancelled}
