"""The Python API's kinds of job, run by a real ``taskq-worker``: declared, code, commands.

One worker per test takes the queues ``default``, ``declared`` and ``gpu``
from ``tests.support`` and runs python_exec and shell jobs too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from tests.support import cli_runs, declared_jobs
from tests.support.cli_runs import ok, one_error_line
from tests.support.worker_process import WorkerFleet, run_worker_to_its_end

pytestmark = pytest.mark.timeout(60)

COUNT_WORDS = (
    "def count_words(text, *, min_length=1):\n"
    "    return len([word for word in text.split() if len(word) >= min_length])\n"
)
WAIT = 30


@pytest.fixture
def worker(workers: WorkerFleet, store_url: str) -> None:
    workers.start(
        store_url,
        worker={
            "queues": ["default", "declared", "gpu"],
            "labels": ["test"],
            "allow_python_exec": True,
            "allow_shell": True,
        },
    )


@pytest.fixture
def default_client(client: taskq.Client) -> Iterator[taskq.Client]:
    """Declared jobs submit through the test's client."""
    taskq.set_default_client(client)
    try:
        yield client
    finally:
        taskq.set_default_client(None)


@pytest.mark.usefixtures("worker")
def test_a_declared_job_submitted_by_reference_with_keyword_arguments(
    default_client: taskq.Client,
) -> None:
    handle = declared_jobs.greet.submit("ann", greeting="hi", punctuation="?")
    assert handle.result(timeout=WAIT) == "hi ann?"
    job = default_client.get(handle.id)
    assert (job.queue, job.max_attempts, job.labels) == ("declared", 2, ("test",))
    assert job.payload == {
        "target": "tests.support.declared_jobs:greet",
        "args": ["ann"],
        "kwargs": {"greeting": "hi", "punctuation": "?"},
    }
    # The same job through a client, and a plain function of a worker's module.
    assert default_client.submit(declared_jobs.area, 3, height=2).result(timeout=WAIT) == 6
    assert default_client.submit(declared_jobs.plain_multiply, 4, b=5).result(timeout=WAIT) == 20


@pytest.mark.usefixtures("worker")
def test_a_declared_async_job_and_a_declared_retry_policy(default_client: taskq.Client) -> None:
    handle = declared_jobs.async_greet.submit("ann", greeting="hi")
    assert handle.result(timeout=WAIT) == "hi ann, from a loop"
    # The declaration's policy travels with each job: KeyError is retried to the
    # last attempt, ValueError ends the job after one.
    retried = declared_jobs.fail_with.submit("KeyError")
    refused = declared_jobs.fail_with.submit("ValueError")
    for handle, state, attempts in ((retried, JobState.DEAD, 3), (refused, JobState.FAILED, 1)):
        job = default_client.wait(handle.id, timeout=WAIT)
        assert (job.state, job.attempts) == (state, attempts)


@pytest.mark.usefixtures("worker")
def test_options_override_the_declared_ones_for_their_calls(default_client: taskq.Client) -> None:
    moved = declared_jobs.greet.options(queue="gpu", priority=7, max_attempts=1)
    handle = moved.submit("bob")
    assert handle.result(timeout=WAIT) == "hello bob!"
    job = default_client.get(handle.id)
    assert (job.queue, job.priority, job.max_attempts) == ("gpu", 7, 1)
    later = declared_jobs.greet.options(delay=3600).submit("cy")
    assert default_client.get(later.id).state is JobState.QUEUED
    assert default_client.get(later.id).run_at > default_client.get(handle.id).created_at + 3000
    # The declaration itself is unchanged.
    again = declared_jobs.greet.submit("dee")
    assert default_client.get(again.id).queue == "declared"
    many = declared_jobs.area.submit_many([(2,), {"width": 2, "height": 4}])
    assert [h.result(timeout=WAIT) for h in many] == [2, 8]


@pytest.mark.usefixtures("worker")
def test_python_exec_and_shell_jobs_from_the_client(client: taskq.Client, tmp_path: Path) -> None:
    counted = client.submit_python(COUNT_WORDS, "count_words", "a bb ccc", kwargs={"min_length": 2})
    assert counted.result(timeout=WAIT) == 2
    shell = client.submit_shell(
        'echo "$GREETING from $(pwd)"; echo noise >&2', cwd=str(tmp_path), env={"GREETING": "hi"}
    )
    assert shell.result(timeout=WAIT) == {
        "exit_code": 0,
        "stdout": f"hi from {tmp_path}\n",
        "stdout_truncated": False,
    }
    failing = client.submit_shell(["sh", "-c", "exit 3"], max_attempts=1)
    with pytest.raises(taskq.errors.JobFailed, match="exited with status 3"):
        failing.result(timeout=WAIT)
    assert client.executions(failing.id)[0].exit_code == 3


@pytest.mark.usefixtures("worker")
def test_python_exec_shell_and_seed_json_jobs_from_the_command(
    store_url: str, tmp_path: Path
) -> None:
    code = tmp_path / "jobs.py"
    code.write_text(COUNT_WORDS, encoding="utf-8")
    ran = ok(
        "submit", "--python", f"{code}:count_words", '"hello big world"', "--wait", store=store_url
    )
    assert json.loads(ran.out) == 3
    ran = ok("submit", "--shell", "printf 'a\\nb\\n' | wc -l", "--wait", store=store_url)
    assert json.loads(ran.out) == {"exit_code": 0, "stdout": "2\n", "stdout_truncated": False}
    seed = {
        "task_id": "wc-1",
        "task_type": "python_exec",
        "payload": {
            "code": "def count_words(text): return len(text.split())",
            "function": "count_words",
            "args": ["hello world"],
        },
        "status": "pending",
    }
    document = tmp_path / "job.json"
    document.write_text(json.dumps(seed), encoding="utf-8")
    ran = ok("submit", "--json-job", str(document), "--wait", store=store_url)
    assert json.loads(ran.out) == 2
    # task_id is the job's key: the same document again is the same job.
    first = ok("submit", "--json-job", str(document), "--json", store=store_url).json()
    second = ok("submit", "--json-job", str(document), "--json", store=store_url).json()
    assert first == second
    assert len(first) == 1
    document.write_text(json.dumps({**seed, "task_type": "perl"}), encoding="utf-8")
    one_error_line(
        cli_runs.taskq("submit", "--json-job", str(document), store=store_url), 2, "task_type"
    )


def test_a_worker_whose_modules_do_not_import_stops_at_once(store_url: str) -> None:
    ran = run_worker_to_its_end(store_url, "--modules", "tests.support.jobs,tests.suport")
    assert ran.returncode == 2, ran
    lines = ran.stderr.strip().splitlines()
    # tests imports: the module it lacks is named, not where to run the worker from.
    assert lines == [
        "taskq-worker: error: cannot import --modules: tests.suport: "
        "tests has no module suport; did you mean tests.support?"
    ]
