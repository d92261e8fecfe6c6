"""What the ``taskq`` command says where a newcomer first met it saying too little or
the wrong thing: a retry's outcome per job and the jobs it brought back, a workflow
retry's count, a --json-job submit to a store not there yet, a mistyped flag.

Each test runs the real command, against a SQLite file of its own (the retries on the
rqlite tier's cluster too); no worker is needed, as a cancel ends jobs as a failure
would for a retry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import taskq
from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.workflow_jobs import add, square

pytestmark = pytest.mark.timeout(120)

JOBS = "tests.support.jobs"


def _submit(url: str, *args: str) -> int:
    return int(ok("submit", "--unchecked", *args, "--queue", "newcomer", store=url).out)


@pytest.mark.both_stores
def test_a_retry_says_which_jobs_wait_for_their_parents_again(store_url: str) -> None:
    parent = _submit(store_url, f"{JOBS}:add", "1", "2")
    child = _submit(store_url, f"{JOBS}:add", "3", "4", "--after", str(parent))
    alone = _submit(store_url, f"{JOBS}:add", "5", "6")
    # The parent's cancel cancels the child that waits on it.
    ok("cancel", str(parent), str(alone), store=store_url)
    assert ok("status", str(child), "--json", store=store_url).json()["state"] == "cancelled"

    retried = ok("retry", str(parent), str(child), str(alone), store=store_url).out
    assert retried.splitlines() == [
        f"job {parent}: queued again",
        f"job {child}: waiting for its parents again",
        f"job {alone}: queued again",
    ]
    assert ok("status", str(child), "--json", store=store_url).json()["state"] == "waiting"

    ok("cancel", str(parent), str(alone), store=store_url)
    as_json = ok("retry", str(parent), str(child), str(alone), "--json", store=store_url).json()
    assert as_json == [
        {"id": parent, "outcome": "requeued"},
        {"id": child, "outcome": "waiting"},
        {"id": alone, "outcome": "requeued"},
    ]


@pytest.mark.both_stores
def test_a_retry_says_how_many_jobs_waiting_on_each_it_brought_back(
    store_url: str, client: taskq.Client
) -> None:
    step = add.options(queue="newcomer")
    flow = square.options(queue="newcomer").step(2).then(step.step(1)).then(step.step(2))
    first, second, third = client.submit_workflow(flow).job_ids
    alone = _submit(store_url, f"{JOBS}:add", "5", "6")
    # The first job's cancel cancels the two after it; a retry of it brings them back.
    ok("cancel", str(first), str(alone), store=store_url)
    retried = ok("retry", str(first), str(alone), store=store_url).out
    assert retried.splitlines() == [
        f"job {first}: queued again; 2 jobs waiting on it brought back",
        f"job {alone}: queued again",
    ]
    states = [client.get(job).state for job in (second, third)]
    assert states == [taskq.JobState.WAITING] * 2

    # Retried with the job it waits on, the second job is said to bring back the third.
    ok("cancel", str(first), store=store_url)
    as_json = ok("retry", str(first), str(second), "--json", store=store_url).json()
    assert as_json == [
        {"id": first, "outcome": "requeued"},
        {"id": second, "outcome": "waiting", "revived": [third]},
    ]
    ok("cancel", str(first), store=store_url)
    as_json = ok("retry", str(first), "--json", store=store_url).json()
    assert as_json == [{"id": first, "outcome": "requeued", "revived": [second, third]}]


@pytest.mark.both_stores
def test_a_workflow_retry_counts_the_jobs_it_brought_back(
    store_url: str, client: taskq.Client
) -> None:
    flow = square.options(queue="newcomer").step(2).then(add.options(queue="newcomer").step(1))
    pipeline = client.submit_workflow(flow.then(add.options(queue="newcomer").step(2)))
    first, second, third = pipeline.job_ids
    # The first job's cancel cancels the two after it, as its failure would.
    ok("cancel", str(first), store=store_url)
    states = [
        ok("status", str(job), "--json", store=store_url).json()["state"] for job in (second, third)
    ]
    assert states == ["cancelled", "cancelled"]

    retried = ok("workflow", "retry", str(pipeline.id), store=store_url).out
    assert retried == (
        f"workflow {pipeline.id}: 3 jobs retried or brought back "
        "(each queued again, or waiting again for its parents)\n"
    )
    counts = client.workflow(pipeline.id).counts
    assert (counts.get(taskq.JobState.QUEUED), counts.get(taskq.JobState.WAITING)) == (1, 2)

    ok("cancel", str(first), store=store_url)
    as_json = ok("workflow", "retry", str(pipeline.id), "--json", store=store_url).json()
    assert as_json == {"workflow_id": pipeline.id, "retried": 3}


def test_a_json_job_file_of_calls_to_a_store_not_there_yet_creates_nothing(
    tmp_path: Path,
) -> None:
    job = {"task_id": "c-1", "task_type": "call", "payload": {"target": f"{JOBS}:add"}}
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps(job))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    store = tmp_path / "new.db"
    url = f"sqlite://{store}"

    refused = taskq_command("submit", "--json-job", str(calls), store=url)
    one_error_line(refused, 2, f"{url} holds no taskq data yet", "the file's calls", "--unchecked")
    not_json = taskq_command("submit", "--json-job", str(broken), store=url)
    one_error_line(not_json, 2, f"--json-job {broken} is not JSON")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken.json", "calls.json"]

    # Unchecked, the file's calls are queued for workers yet to start: the store is made.
    queued = ok("submit", "--json-job", str(calls), "--unchecked", "--json", store=url)
    assert [entry["id"] for entry in queued.json()] == [1]
    assert store.exists()
