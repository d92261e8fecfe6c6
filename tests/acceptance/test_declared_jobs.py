"""Declared jobs end to end, on both stores: a real worker publishes them, and the CLI and
the HTTP API submit them by name exactly as the declared job would be submitted."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.dev.server import running_server, write_server_config
from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.worker_process import WorkerFleet

NAME = "tests.support.counted_jobs:count_words"
DECLARED_QUEUE = "texts"  # what tests/support/counted_jobs.py declares
WAIT_SECONDS = 30.0


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url


@pytest.fixture
def serving(store: str, workers: WorkerFleet) -> str:
    """A live worker that declares count_words and takes a queue of its own (so the jobs
    submitted here stay queued, to be read as they landed); the queue's name."""
    queue = f"own-{uuid.uuid4().hex[:8]}"
    worker = workers.start(
        store, worker={"modules": ["tests.support.counted_jobs"], "queues": [queue]}
    )

    # It publishes its declared jobs before it registers, and says it started once registered.
    worker.wait_for_event("worker_started", timeout=WAIT_SECONDS)
    [listed] = [
        each for each in ok("functions", "--json", store=store).json() if each["name"] == NAME
    ]
    # count_words' queue is not one it takes: it is not listed as serving it.
    assert worker.worker_id not in listed["workers"], listed
    return queue


def _job(store: str, job_id: int) -> dict[str, Any]:
    return dict(ok("status", str(job_id), "--json", store=store).json())


def test_the_cli_submits_by_name_as_declared_and_flags_win(store: str, serving: str) -> None:
    declared = _job(store, ok("submit", NAME, '"a b c"', "--json", store=store).json()["id"])
    assert (declared["queue"], declared["max_attempts"], declared["timeout"]) == (
        DECLARED_QUEUE,
        5,
        600.0,
    )
    assert (declared["retry"]["base"], declared["retry"]["factor"]) == (2.0, 3.0)

    other = f"other-{uuid.uuid4().hex[:8]}"
    flags = ("--queue", other, "--max-attempts", "2", "--timeout", "5")
    given = _job(store, ok("submit", NAME, '"a b c"', *flags, "--json", store=store).json()["id"])
    assert (given["queue"], given["max_attempts"], given["timeout"]) == (other, 2, 5.0)


def test_the_cli_refuses_bad_arguments_and_unknown_names(store: str, serving: str) -> None:
    queue = f"refused-{uuid.uuid4().hex[:8]}"
    refused = taskq_command("submit", NAME, "1", "2", "--queue", queue, store=store)
    one_error_line(refused, 2, "count_words(text: str, *, lower: bool = True)", "2 positional")
    misspelt = NAME.replace("count_words", "count_word")
    unknown = taskq_command("submit", misspelt, '"x"', "--queue", queue, store=store)
    one_error_line(unknown, 2, f"no worker has declared {misspelt}", f"did you mean {NAME}")
    # A dotted path, as Celery names a task: the module's declared jobs, or the job meant.
    module = NAME.partition(":")[0]
    dotted = taskq_command("submit", module, '"x"', "--queue", queue, store=store)
    one_error_line(dotted, 2, f"got {module!r}; {module} is a module; its declared jobs: ", NAME)
    whole = taskq_command("submit", NAME.replace(":", "."), '"x"', "--queue", queue, store=store)
    one_error_line(whole, 2, f"did you mean {NAME!r}?")
    with taskq.Client(store) as client:
        with pytest.raises(errors.InvalidJob, match=f"{module} is a module; its declared jobs: "):
            client.submit(module, "x", queue=queue)
        assert client.list(taskq.JobQuery(queue=queue)) == []

    unchecked = ok(
        "submit", misspelt, '"x"', "--queue", queue, "--unchecked", "--json", store=store
    )
    assert _job(store, unchecked.json()["id"])["queue"] == queue


def test_a_submit_by_name_to_a_store_not_there_creates_nothing(tmp_path: Path) -> None:
    # No store file: no worker can have declared anything. The refusal says
    # so, and leaves the file for a worker (or an unchecked submit) to create.
    # so, naming the store (the workers' most often is another), not blaming the
    # name, and leaves the file for a worker (or an unchecked submit) to create.
    path = tmp_path / "never.db"
    url = f"sqlite://{path}"
    refused = taskq_command("submit", NAME, '"x"', store=url)
    said = f"{url} holds no taskq data yet (there is no {path}): no worker has used this store"
    one_error_line(refused, 2, said, f"none has declared {NAME}", "TASKQ_STORE", "--unchecked")
    scheduled = taskq_command("schedule", "add", "n", "--every", "1h", NAME, store=url)
    one_error_line(scheduled, 2, said, f"none has declared {NAME}")
    malformed = taskq_command("submit", "count_words", '"x"', store=f"sqlite://{path}")
    one_error_line(malformed, 2, "target must look like 'package.module:function'")
    # A dot where the colon goes, as a Celery task's name is written: the name meant.
    dotted = taskq_command("submit", NAME.replace(":", "."), '"x"', store=url)
    one_error_line(dotted, 2, "target must look like", f"; did you mean {NAME!r}?")
    assert sorted(tmp_path.iterdir()) == []
    # Unchecked, a first submit makes the store; still no worker declared anything there.
    ok("submit", "--unchecked", NAME, '"x"', store=url)
    again = taskq_command("submit", NAME, '"x"', store=url)
    one_error_line(again, 2, f"no worker has declared any job in {url}, so none has declared")


def test_http_submits_by_name_as_declared_and_members_win(
    store: str, serving: str, tmp_path: Path
) -> None:
    config = write_server_config(tmp_path / "server.toml", {"scripts": ["read", "submit"]})
    with running_server(store, config, tmp_path / "serve.log") as server:
        http = server.client("scripts")
        sent = http.post("/jobs", json={"target": NAME, "args": ["a b"]})
        assert sent.status_code == 201, sent.text
        declared = http.get(f"/jobs/{sent.json()['id']}").json()
        assert (declared["queue"], declared["max_attempts"], declared["timeout"]) == (
            DECLARED_QUEUE,
            5,
            600.0,
        )
        assert declared["retry"]["base"] == 2.0

        other = f"other-{uuid.uuid4().hex[:8]}"
        body = {"target": NAME, "args": ["a"], "queue": other, "max_attempts": 1, "timeout": 9}
        given = http.get(f"/jobs/{http.post('/jobs', json=body).json()['id']}").json()
        assert (given["queue"], given["max_attempts"], given["timeout"]) == (other, 1, 9.0)

        bad = http.post("/jobs", json={"target": NAME, "args": [], "queue": other})
        assert bad.status_code == 422
        assert "missing a required argument: 'text'" in bad.text
        misspelt = NAME.replace("count_words", "count_word")
        unknown = http.post("/jobs", json={"target": misspelt, "queue": other})
        assert unknown.status_code == 422
        assert f"did you mean {NAME}" in unknown.text
        assert len(http.get("/jobs", params={"queue": other}).json()["jobs"]) == 1

        forced = http.post("/jobs", json={"target": misspelt, "queue": other, "unchecked": True})
        assert forced.status_code == 201, forced.text

        schema = http.get("/openapi.json").json()
        answer = schema["paths"]["/functions"]["get"]["responses"]["200"]["content"]
        assert answer["application/json"]["schema"] == {"$ref": "#/components/schemas/Functions"}
        schemas = schema["components"]["schemas"]
        assert set(schemas["DeclaredFunction"]["required"]) >= {"name", "signature", "workers"}
        assert schemas["JobRequest"]["properties"]["unchecked"]["type"] == "boolean"

        listed = http.get("/functions").json()["functions"]
        [function] = [each for each in listed if each["name"] == NAME]
        assert function["signature"] == f"{NAME}(text: str, *, lower: bool = True)"
        assert (function["queue"], function["doc"]) == (
            DECLARED_QUEUE,
            "Count the words of a text.",
        )


def test_queues_flag_queued_jobs_no_live_worker_takes(store: str, serving: str) -> None:
    stranded = f"stranded-{uuid.uuid4().hex[:8]}"
    ok("submit", NAME, '"a"', "--queue", stranded, store=store)
    ok("submit", NAME, '"a"', "--queue", serving, "--delay", "1h", store=store)
    queues = {each["queue"]: each for each in ok("queues", "--json", store=store).json()}
    assert queues[stranded]["unserved"] is True
    assert queues[serving]["unserved"] is False
    table = ok("queues", store=store).out.splitlines()
    [row] = [line for line in table if line.startswith(stranded)]
    assert row.rstrip().endswith("NONE LIVE")


def test_cli_files_and_schedules_by_name_are_declared_and_checked(
    store: str, serving: str, tmp_path: Path
) -> None:
    queue = f"file-{uuid.uuid4().hex[:8]}"
    misspelt = NAME.replace("count_words", "count_word")

    def call(target: str, *args: Any) -> dict[str, Any]:
        return {"task_type": "call", "payload": {"target": target, "args": list(args)}}

    file = tmp_path / "jobs.json"
    file.write_text(json.dumps([call(NAME, "a b"), call(NAME, 1, 2)]))
    refused = taskq_command("submit", "--json-job", str(file), "--queue", queue, store=store)
    one_error_line(refused, 2, "entry 2 of the batch (position 1): ", "2 positional")
    file.write_text(json.dumps([call(NAME, "a b"), call(misspelt, "c")]))
    refused = taskq_command("submit", "--json-job", str(file), "--queue", queue, store=store)
    one_error_line(
        refused, 2, f"entry 2 of the batch (position 1): no worker has declared {misspelt}"
    )
    with taskq.Client(store) as client:
        assert client.list(taskq.JobQuery(queue=queue)) == []
    ids = ok("submit", "--json-job", str(file), "--unchecked", "--json", store=store).json()
    assert [_job(store, each["id"])["max_attempts"] for each in ids] == [3, 3]
    file.write_text(json.dumps([call(NAME, "a b")]))
    [declared] = ok("submit", "--json-job", str(file), "--json", store=store).json()
    assert (_job(store, declared["id"])["queue"], _job(store, declared["id"])["max_attempts"]) == (
        DECLARED_QUEUE,
        5,
    )

    name = f"nightly-{queue}"
    unknown = taskq_command("schedule", "add", name, "--every", "1h", misspelt, store=store)
    one_error_line(unknown, 2, f"no worker has declared {misspelt}", f"did you mean {NAME}")
    added = ok("schedule", "add", name, "--every", "1h", NAME, '"x"', "--json", store=store)
    assert (added.json()["spec"]["queue"], added.json()["spec"]["max_attempts"]) == (
        DECLARED_QUEUE,
        5,
    )
    forced = ok(
        "schedule", "add", f"{name}-u", "--every", "1h", misspelt, "--unchecked", store=store
    )
    assert f"{name}-u" in forced.out


def test_http_batches_workflows_and_schedules_by_name_are_declared_and_checked(
    store: str, serving: str, tmp_path: Path
) -> None:
    misspelt = NAME.replace("count_words", "count_word")
    other = f"other-{uuid.uuid4().hex[:8]}"
    config = write_server_config(tmp_path / "server.toml", {"scripts": ["read", "submit", "admin"]})
    with running_server(store, config, tmp_path / "serve.log") as server:
        http = server.client("scripts")
        batch = [{"target": NAME, "args": ["a"], "queue": other}, {"target": misspelt}]
        refused = http.post("/jobs", json=batch)
        assert refused.status_code == 422
        detail = refused.json()["detail"]
        assert f"entry 2 of the batch (position 1): no worker has declared {misspelt}" in detail
        assert http.get("/jobs", params={"queue": other}).json()["jobs"] == []

        flow = {
            "jobs": [{"target": NAME, "args": ["a"]}, {"target": NAME, "args": [], "parents": [0]}]
        }
        bad = http.post("/workflows", json=flow)
        assert bad.status_code == 422
        assert "job 1: " in bad.json()["detail"]
        assert "'text'" in bad.json()["detail"]
        flow["jobs"][1] = {"target": NAME, "args": ["b"], "parents": [0], "priority": 7}
        sent = http.post("/workflows", json=flow)
        assert sent.status_code == 201, sent.text
        jobs = [http.get(f"/jobs/{job_id}").json() for job_id in sent.json()["job_ids"]]
        assert [(job["queue"], job["max_attempts"], job["priority"]) for job in jobs] == [
            (DECLARED_QUEUE, 5, 0),
            (DECLARED_QUEUE, 5, 7),
        ]

        schedule = {"name": f"s-{other}", "every_seconds": 3600, "job": {"target": misspelt}}
        unknown = http.post("/schedules", json=schedule)
        assert unknown.status_code == 422
        assert f"did you mean {NAME}" in unknown.json()["detail"]
        schedule["job"] = {"target": NAME, "args": ["x"]}
        added = http.post("/schedules", json=schedule)
        assert added.status_code == 201, added.text
        spec = added.json()["schedule"]["spec"]
        assert (spec["queue"], spec["max_attempts"]) == (DECLARED_QUEUE, 5)
