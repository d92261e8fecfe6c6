"""The real ``taskq`` command over a real ``taskq serve``: its URL as the store.

One server for the module, over an embedded store in a folder of its own,
with tokens; the command bears one in ``TASKQ_TOKEN``, as a script's client
does. Jobs that must run are run by a real ``taskq-worker`` on the store
itself, serving a queue of the test's own. Each wait is a bounded one: the
command's own ``--wait``/``--timeout``, or a condition polled to a deadline.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq.dev.processes import wait_until
from taskq.dev.server import ServerProcess, running_server, token_of, write_server_config
from tests.support.cli_runs import Ran, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.worker_process import WorkerFleet
from tests.support.workflow_jobs import add, fail, square, total

pytestmark = pytest.mark.timeout(240)

TOKENS = {"scripts": ["read", "submit"], "ops": ["read", "submit", "admin"]}
DECLARED = "tests.support.workflow_jobs"
JOBS = "tests.support.jobs"
WAIT = 60
NO_SUCH_JOB = 987_654_321
# Well under the 30 s the Python client rides out a server not reached for: a command that
# waits that long is killed by it, and fails, with no clock read by the test.
PROMPT_SECONDS = 20


class Served:
    """The store, the taskq serve over it, and a Python client on the store itself."""

    def __init__(self, store_url: str, server: ServerProcess, client: taskq.Client) -> None:
        self.store_url = store_url
        self.server = server
        self.client = client

    def run(self, *args: str, token: str | None = "ops", **env: str) -> Ran:
        """``taskq ARGS`` with ``TASKQ_STORE`` the server's URL, bearing ``token``'s secret."""
        given = {"TASKQ_STORE": self.server.url, **env}
        if token is not None:
            given["TASKQ_TOKEN"] = token_of(token)
        return taskq_command(*args, env=given)

    def ok(self, *args: str, token: str | None = "ops") -> Ran:
        ran = self.run(*args, token=token)
        assert ran.code == 0, f"taskq {' '.join(args)} exited {ran.code}\n{ran.out}\n{ran.err}"
        return ran


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("cli-over-http")
    store_url = f"sqlite://{root / 'taskq.db'}"
    config = write_server_config(root / "config.toml", TOKENS)
    with (
        running_server(store_url, config, root / "serve.log") as server,
        taskq.Client(store_url, submitter="on-the-store") as client,
    ):
        yield Served(store_url, server, client)


@pytest.fixture
def queue() -> str:
    return f"over-http-{uuid.uuid4().hex[:10]}"


def _serve_queue(workers: WorkerFleet, served: Served, queue: str) -> str:
    """A worker on the store that runs the declared jobs and tests.support.jobs; its id."""
    worker = workers.start(
        served.store_url,
        worker={"queues": [queue], "modules": [DECLARED, JOBS]},
    )
    return worker.worker_id


def test_a_job_is_submitted_by_name_waited_for_and_looked_at_over_http(
    served: Served, queue: str, workers: WorkerFleet
) -> None:
    worker_id = _serve_queue(workers, served, queue)

    # By name: the server resolves it as declared, the submitter is the token's name.
    job_id = int(served.ok("submit", f"{DECLARED}:square", "7", "--queue", queue).out)
    assert served.ok("result", str(job_id), "--wait", "--timeout", str(WAIT)).out == "49\n"
    status = served.ok("status", str(job_id)).out
    assert "state      succeeded" in status
    assert "submitter  ops" in status
    assert f"worker     {worker_id}" in status
    listed = served.ok("jobs", "--queue", queue, "--json").json()
    assert [(job["id"], job["state"]) for job in listed] == [(job_id, "succeeded")]

    # --wait on the submit itself, and a call the arguments do not fit, refused by the server.
    waited = served.ok("submit", f"{DECLARED}:add", "2", "3", "--queue", queue, "--wait")
    assert waited.out == "5\n"
    refused = served.run("submit", f"{DECLARED}:square", '"seven"', "--queue", queue)
    one_error_line(refused, 2, f"{DECLARED}:square(x: int) refuses", "x: int was given 'seven'")

    # Its attempts, and its output followed live until it ended.
    said = int(
        served.ok(
            "submit", "--unchecked", f"{JOBS}:say_and_return", '"hello"', "--queue", queue
        ).out
    )
    followed = served.ok("logs", "-f", str(said))
    assert "hello" in followed.out
    assert "the job's state: succeeded" in followed.err
    logs = served.ok("logs", str(said)).out
    assert f"attempt 1 of 3  succeeded  worker {worker_id}" in logs
    assert "log tail:\n    hello" in logs

    # The fleet, as the server sees it.
    queues = {each["queue"]: each for each in served.ok("queues", "--json").json()}
    assert queues[queue]["counts"]["succeeded"] == 3
    assert (queues[queue]["unserved"], queues[queue]["workers"]) == (False, 1)
    assert worker_id in {each["id"] for each in served.ok("workers", "--json").json()}
    declared = {each["name"] for each in served.ok("functions", "--json").json()}
    assert f"{DECLARED}:square" in declared


def test_cancel_retry_and_after_over_http(served: Served, queue: str) -> None:
    # No worker serves the queue: the jobs stay where the commands put them.
    first = int(served.ok("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue).out)
    later = int(
        served.ok(
            "submit", "--unchecked", f"{JOBS}:add", "3", "4", "--queue", queue,
            "--after", str(first),
        ).out
    )  # fmt: skip
    assert served.client.get(later).state.value == "waiting"
    # Relatives outside any workflow, read by the server from the stored parents.
    status = served.ok("status", str(later)).out
    assert f"parents    {first} queued; waits for 1 of them to end" in status
    assert f"children   {later} waiting" in served.ok("status", str(first)).out

    assert served.ok("cancel", str(first)).out == f"job {first}: cancelled\n"
    assert served.client.get(later).state.value == "cancelled"
    unchanged = served.run("cancel", str(first))
    one_error_line(unchanged, 1, f"job {first} (cancelled): already ended")

    retried = served.ok("retry", str(first)).out
    assert retried == f"job {first}: queued again; 1 job waiting on it brought back\n"
    assert served.client.get(first).state.value == "queued"
    assert served.client.get(later).state.value == "waiting"
    assert "state      queued" in served.ok("status", str(first)).out

    queues = {each["queue"]: each for each in served.ok("queues", "--json").json()}
    assert queues[queue]["unserved"] is True  # no live worker takes it

    unknown = f"no job with id {NO_SUCH_JOB} (taskq jobs lists the newest)"
    for args in (["status"], ["logs"], ["cancel"], ["retry"]):
        one_error_line(served.run(*args, str(NO_SUCH_JOB)), 1, unknown)
    waiting = served.run("result", str(first))
    one_error_line(waiting, 1, f"job {first} is still queued; add --wait")


def test_a_workflow_is_shown_and_steered_over_http(
    served: Served, queue: str, workers: WorkerFleet
) -> None:
    first = square.options(queue=queue).step(3)
    flow = taskq.group(
        first.then(add.options(queue=queue).step(1, 2)), first.then(fail.options(queue=queue))
    ).then(total.options(queue=queue))
    pipeline = served.client.submit_workflow(flow, name="over-http")
    root, left, failing, fan_in = pipeline.job_ids

    shown = served.ok("workflow", "show", str(pipeline.id)).out.splitlines()
    assert shown[0].startswith(f"workflow {pipeline.id} 'over-http' (running), by on-the-store")
    assert shown[-1] == "4 jobs: 1 queued, 3 waiting"
    # A job's relatives, and its workflow.
    status = served.ok("status", str(fan_in)).out
    assert f"workflow   {pipeline.id} 'over-http' (running)" in status
    assert f"parents    {left} waiting, {failing} waiting; waits for 2 of them to end" in status
    assert f"children   {left} waiting, {failing} waiting" in served.ok("status", str(root)).out
    listed = served.ok("workflow", "list", "--json").json()
    assert pipeline.id in {each["id"] for each in listed}

    _serve_queue(workers, served, queue)
    waited = served.run("workflow", "wait", str(pipeline.id), "--timeout", str(WAIT))
    assert waited.code == 1, waited
    assert waited.out.startswith(f"workflow {pipeline.id} 'over-http' failed")
    retried = served.ok("workflow", "retry", str(pipeline.id), "--json").json()
    assert retried == {"workflow_id": pipeline.id, "retried": 2}
    assert wait_until(lambda: served.client.get(failing).state.finished, WAIT)
    # Every job has ended: nothing to cancel is exit 1, as over the store (and HTTP's 409).
    ended = served.run("workflow", "cancel", str(pipeline.id))
    assert (ended.code, ended.out) == (
        1,
        f"workflow {pipeline.id}: nothing to cancel; every job of it has ended\n",
    ), ended


def test_a_json_job_files_calls_are_resolved_by_the_server(
    served: Served, queue: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    _serve_queue(workers, served, queue)

    def call(target: str, *args: Any, task_id: str) -> dict[str, Any]:
        payload = {"target": target, "args": list(args)}
        return {"task_id": task_id, "task_type": "call", "payload": payload}

    tag = uuid.uuid4().hex[:8]
    file = tmp_path / "jobs.json"
    file.write_text(
        json.dumps(
            [
                call(f"{DECLARED}:square", 4, task_id=tag),
                call(f"{DECLARED}:nope", task_id=f"{tag}-2"),
            ]
        )
    )
    refused = served.run("submit", "--json-job", str(file), "--queue", queue)
    one_error_line(refused, 2, "entry 2 of the batch (position 1): ", f"{DECLARED}:nope")
    assert served.client.list(taskq.JobQuery(queue=queue)) == []

    file.write_text(
        json.dumps(
            [
                call(f"{DECLARED}:square", 4, task_id=tag),
                call(f"{DECLARED}:add", 1, task_id=f"{tag}-2"),
            ]
        )
    )
    ids = [
        each["id"]
        for each in served.ok("submit", "--json-job", str(file), "--queue", queue, "--json").json()
    ]
    results = [
        served.ok("result", str(job_id), "--wait", "--timeout", str(WAIT)).out for job_id in ids
    ]
    assert results == ["16\n", "1\n"]
    assert served.client.get(ids[0]).idempotency_key == tag


def test_a_command_that_needs_the_store_refuses_the_server_and_does_nothing(
    served: Served, queue: str, tmp_path: Path
) -> None:
    backup = tmp_path / "backup.db"
    refused = served.run("backup", str(backup))
    one_error_line(
        refused,
        2,
        f"taskq backup needs the store itself ({served.server.url} is a taskq serve)",
        "use --store with the store's URL",
    )
    assert not backup.exists()
    for args, named in (
        (["restore", str(backup)], "taskq restore"),
        (["serve"], "taskq serve"),
        (["cluster", "remove", "node2"], "taskq cluster remove"),
        (["migrate"], "taskq migrate"),
        (["migrate", "--check"], "taskq migrate"),
    ):
        one_error_line(served.run(*args), 2, f"{named} needs the store itself")

    # Requests the server has no endpoint for are refused before anything is sent.
    queue_set = served.run("queue", "set", queue, "--timeout", "5m", "--create")
    one_error_line(queue_set, 2, "taskq queue set needs the store itself", "set_queue_defaults")
    shell = served.run("submit", "--shell", "true", "--queue", queue)
    one_error_line(shell, 2, "taskq submit needs the store itself", "a shell job")
    assert served.client.list(taskq.JobQuery(queue=queue)) == []
    assert queue not in {stats.queue for stats in served.client.stats()}


def test_a_missing_or_wrong_token_is_one_line(served: Served) -> None:
    missing = served.run("jobs", token=None)
    one_error_line(missing, 1, f"taskq serve at {served.server.url} wants a token", "TASKQ_TOKEN")
    wrong = served.run("jobs", token=None, TASKQ_TOKEN="not-a-token")
    one_error_line(wrong, 1, "refused the token in TASKQ_TOKEN", "not one this server knows")
    limited = served.run("prune", "--older-than", "30d", token="scripts")
    one_error_line(limited, 1, "lacks the 'admin' scope")


def test_the_server_is_named_as_any_store(served: Served, tmp_path: Path) -> None:
    """By --store before or after the command, and by the config file."""
    env = {"TASKQ_TOKEN": token_of("scripts")}
    for args in (
        ["--store", served.server.url, "jobs", "--limit", "1"],
        ["jobs", "--limit", "1", "--store", served.server.url],
    ):
        ran = taskq_command(*args, env=env)
        assert ran.code == 0, ran
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nurl = "{served.server.url}"\n')
    ran = taskq_command("--config", str(config), "workers", "--json", env=env)
    assert ran.code == 0, ran
    assert isinstance(json.loads(ran.out), list)


def test_a_server_not_reached_is_one_line_within_seconds() -> None:
    """A wrong port is said in seconds, as a store that refuses the connection is (exit 1),
    not after the 30 s a script's client would wait for a server to come back."""
    with socket.socket() as held:
        # Bound, not listening: the port refuses connections, and no other test takes it.
        held.bind(("127.0.0.1", 0))
        url = f"http://someone:secret@127.0.0.1:{held.getsockname()[1]}"
        shown = f"taskq serve at {url.replace(':secret@', ':***@')} did not answer"
        listed = taskq_command("--store", url, "jobs", timeout=PROMPT_SECONDS)
        line = one_error_line(listed, 1, shown, "Connection refused")
        assert "secret" not in line
        # By TASKQ_STORE, bearing a token, a command that writes: the same, nothing sent.
        env = {"TASKQ_STORE": url, "TASKQ_TOKEN": "a-token"}
        cancel = taskq_command("cancel", "1", env=env, timeout=PROMPT_SECONDS)
        one_error_line(cancel, 1, shown, "Connection refused")
