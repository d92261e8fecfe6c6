"""Workflows run by a real ``taskq-worker``, on each store, in each isolation mode.

A map over inputs then a fan-in that sums its parents' results (more
parents than one page of the worker's reads, where the children are cheap
enough to run that many); a chain whose every link reads the one before; a
job that spawns K children and a fan-in over them at run time, whose result
proves it saw all K; a spawn by name, resolved by the worker as declared, or
refused. Each test waits on results with bounded timeouts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq import errors
from taskq.broker.records import JobState
from taskq.worker.parent_results import PAGE
from tests.support.cli_runs import ok
from tests.support.worker_process import WorkerFleet
from tests.support.workflow_jobs import (
    add,
    plus_parent,
    spawn_by_name,
    spawn_refused_by_store,
    spawn_squares,
    square,
    total,
)

pytestmark = [pytest.mark.both_stores, pytest.mark.timeout(180)]

WAIT = 120
JOBS = "tests.support.workflow_jobs"


@pytest.fixture
def client(store_url: str) -> Iterator[taskq.Client]:
    with taskq.Client(store_url, submitter="acceptance") as opened:
        yield opened


@pytest.fixture(params=["pool", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def worker_tmp(tmp_path: Path) -> Path:
    """The worker's TMPDIR, where it writes its jobs' parents files."""
    path = tmp_path / "worker-tmp"
    path.mkdir()
    return path


@pytest.fixture
def queue(workers: WorkerFleet, store_url: str, isolation: str, worker_tmp: Path) -> str:
    """A queue of this test's own (the rqlite cluster is shared), and a worker for it."""
    name = f"flows-{uuid.uuid4().hex[:8]}"
    workers.start(
        store_url,
        worker={"queues": [name], "concurrency": 2, "isolation": isolation},
        extra_env={"TMPDIR": str(worker_tmp)},
    )
    return name


def test_a_map_then_a_fan_in_over_every_result(
    client: taskq.Client, queue: str, isolation: str, worker_tmp: Path
) -> None:
    # Past one page of the worker's reads where a job costs a message (pool); a child
    # per job costs an interpreter, and the file's pages are the same either way.
    count = PAGE + 25 if isolation == "pool" else 12
    flow = square.options(queue=queue).map(range(count)).then(total.options(queue=queue))
    pipeline = client.submit_workflow(flow, name="squares")
    assert pipeline.result(timeout=WAIT) == {
        "sum": sum(i * i for i in range(count)),
        "count": count,
        "in_order": True,
        "parent_count": count,
    }
    info = pipeline.wait(timeout=WAIT)
    assert info.counts[JobState.SUCCEEDED] == count + 1
    # The fan-in's file of parents is removed before its report is sent.
    assert list(worker_tmp.iterdir()) == []


def test_a_chain_hands_each_result_on(client: taskq.Client, queue: str) -> None:
    link = plus_parent.options(queue=queue)
    flow = add.options(queue=queue).step(1, 2).then(link.step(10)).then(link.step(100))
    pipeline = client.submit_workflow(flow)
    assert pipeline.result(timeout=WAIT) == 113
    assert [job.result(timeout=WAIT) for job in pipeline.jobs()] == [3, 13, 113]


def test_a_job_spawns_children_and_a_fan_in_that_sees_them_all(
    client: taskq.Client, queue: str, store_url: str
) -> None:
    k = 7
    pipeline = client.submit_workflow(spawn_squares.options(queue=queue).step(k))
    assert pipeline.result(timeout=WAIT) == f"spawned {k}"
    info = pipeline.wait(timeout=WAIT)
    assert info.counts.get(JobState.SUCCEEDED) == 1 + k + 1, info
    jobs = client.list(taskq.JobQuery(workflow_id=pipeline.id, limit=k + 3))
    assert len(jobs) == 1 + k + 1
    [fan_in] = [job for job in jobs if job.payload["target"].endswith(":total")]
    assert fan_in.result == {
        "sum": sum(i * i for i in range(k)),
        "count": k,
        "in_order": True,
        "parent_count": k,
    }
    # The tree hangs the run-time fan-out from the job that spawned it.
    spawner, *children = sorted(job.id for job in jobs)
    drawn = ok("workflow", "show", str(pipeline.id), store=store_url).out.splitlines()
    assert drawn[1].startswith(f"{spawner} succeeded  {JOBS}:spawn_squares({k})"), drawn
    assert [line.split()[:3] for line in drawn[2:-1:2]] == [
        [branch, "spawned", str(child)]
        for branch, child in zip(["├─"] * (k - 1) + ["└─"], children[:k], strict=True)
    ], drawn
    assert f"spawned by  {spawner} succeeded" in ok("status", str(fan_in.id), store=store_url).out


def test_a_spawn_by_name_is_written_as_declared_or_fails_the_job(
    client: taskq.Client, workers: WorkerFleet, store_url: str
) -> None:
    queue = f"flows-{uuid.uuid4().hex[:8]}"
    # The worker publishes the jobs of workflow_jobs: cube, with 4 attempts and 60 s.
    modules = ["tests.support", JOBS]
    workers.start(store_url, worker={"queues": [queue], "concurrency": 2, "modules": modules})
    spawner = spawn_by_name.options(queue=queue)
    pipeline = client.submit_workflow(spawner.step(f"{JOBS}:cube", [3], {"queue": queue}))
    assert pipeline.result(timeout=WAIT) == "spawned"
    info = pipeline.wait(timeout=WAIT)
    assert info.counts.get(JobState.SUCCEEDED) == 3, info
    jobs = client.list(taskq.JobQuery(workflow_id=pipeline.id, limit=5))
    [cube] = [job for job in jobs if job.payload["target"] == f"{JOBS}:cube"]
    assert (cube.queue, cube.max_attempts, cube.timeout, cube.result) == (queue, 4, 60.0, 27)

    refused = client.submit_workflow(spawner.step(f"{JOBS}:cubes", [3], {"queue": queue}))
    with pytest.raises(errors.JobFailed):
        refused.result(timeout=WAIT)
    [job] = client.list(taskq.JobQuery(workflow_id=refused.id, limit=5))
    assert job.state is JobState.FAILED
    assert job.error is not None
    assert job.error["type"] == "taskq.errors.UnknownFunction"
    assert f"did you mean {JOBS}:cube " in job.error["message"]


def test_a_spawn_the_store_refuses_fails_its_job_and_the_worker_serves_on(
    client: taskq.Client, queue: str
) -> None:
    other = client.submit(square.options(queue=queue), 2)
    assert other.result(timeout=WAIT) == 4
    spawner = spawn_refused_by_store.options(queue=queue)
    said = {
        "submitted": f"no job has the id(s) [{2**62}] given as parents",
        "foreign": f"the stored parent(s) [{other.id}] are not in",
    }
    for kind, words in said.items():
        refused = client.submit_workflow(spawner.step(kind, other.id))
        with pytest.raises(errors.JobFailed):
            refused.result(timeout=WAIT)
        [job] = client.list(taskq.JobQuery(workflow_id=refused.id, limit=5))  # none spawned
        assert (job.state, job.attempts) == (JobState.FAILED, 1), kind
        assert job.error is not None
        assert job.error["message"].startswith("its spawn was refused, nothing was spawned: ")
        assert words in job.error["message"], job.error
        assert job.error["gave_up"] == "permanent"
    # The refusals failed their jobs, not the worker: it runs the next job.
    assert client.submit(square.options(queue=queue), 5).result(timeout=WAIT) == 25
