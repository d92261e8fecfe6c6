"""``taskq serve`` as a real process on both stores, driven over HTTP with httpx.

One server per store for the module; each test works in queues of its own
names, so tests share the server (and the session's rqlite cluster).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import taskq
from taskq import errors
from taskq.broker.records import FINISHED_STATES, JobState
from taskq.broker.worker_policy import Policy
from taskq.dev.processes import free_ports, wait_until
from taskq.dev.server import ServerProcess, running_server, token_of, write_server_config
from tests.support.cli_runs import one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.registered_workers import register
from tests.support.rqlite_cluster import (
    STORE_KINDS,
    RqliteCluster,
    make_test_certificates,
    running_cluster,
)
from tests.support.worker_process import WorkerFleet

TOKENS = {
    "scripts": ["read", "submit"],
    "viewer": ["read"],
    "ops": ["admin"],
    "limited": ["read", "submit"],
}


class Served:
    """A store, the server over it, and a Python client on the same store."""

    def __init__(self, store_url: str, server: ServerProcess, client: taskq.Client) -> None:
        self.store_url = store_url
        self.server = server
        self.client = client

    def http(self, token: str | None = "scripts") -> httpx.Client:
        return self.server.client(token)


@pytest.fixture(scope="module", params=STORE_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve")
    if request.param == "sqlite":
        store_url = f"sqlite://{root / 'taskq.db'}"
    else:
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        store_url = cluster.url
    config = write_server_config(root / "config.toml", TOKENS)
    with (
        running_server(store_url, config, root / "serve.log") as server,
        taskq.Client(store_url, submitter="tests") as client,
    ):
        yield Served(store_url, server, client)


def _queue() -> str:
    return f"http-{uuid.uuid4().hex[:10]}"


def _job(
    queue: str, target: str = "tests.support.jobs:add", args: Sequence[object] = (1, 2)
) -> dict[str, object]:
    # Plain functions of the workers' modules: no worker declares them.
    return {"target": target, "args": list(args), "queue": queue, "unchecked": True}


def test_a_job_lives_its_life_over_http(served: Served, workers: WorkerFleet) -> None:
    queue = _queue()
    worker = workers.start(served.store_url, worker={"queues": [queue]})
    with served.http() as http:
        answer = http.post("/jobs", json=_job(queue, args=(20, 22)))
        assert answer.status_code == 201, answer.text
        job_id = answer.json()["id"]
        assert answer.headers["location"] == f"/jobs/{job_id}"

        outcome = http.get(f"/jobs/{job_id}/result", params={"timeout": 30})
        assert outcome.status_code == 200, outcome.text
        assert outcome.json() == {
            "id": job_id,
            "state": "succeeded",
            "finished": True,
            "result": 42,
            "error": None,
        }
        job = http.get(f"/jobs/{job_id}").json()
        assert job["submitter"] == "scripts"
        assert job["state"] == "succeeded"

        [attempt] = http.get(f"/jobs/{job_id}/executions").json()["executions"]
        assert attempt["outcome"] == "succeeded"
        worker_id = attempt["worker_id"]
        assert worker_id in {found["id"] for found in http.get("/workers").json()["workers"]}
        by_worker = http.get(f"/workers/{worker_id}/executions").json()["executions"]
        assert [run["job_id"] for run in by_worker] == [job_id]
        mistyped = http.get(f"/workers/{worker_id}x/executions")
        assert mistyped.status_code == 404, mistyped.text
        assert mistyped.json()["type"] == "urn:taskq:problem:WorkerNotFound"
        assert mistyped.json()["detail"] == f"no worker with id '{worker_id}x'"
        assert [
            found["id"] for found in http.get("/jobs", params={"worker": worker_id}).json()["jobs"]
        ] == [job_id]

        queues = {stats["queue"]: stats for stats in http.get("/queues").json()["queues"]}
        assert queues[queue]["counts"]["succeeded"] == 1
    assert worker.pid > 0


def test_the_workers_carry_their_policies(served: Served) -> None:
    queue = _queue()
    recorded, older = (f"{queue}-{which}" for which in ("recorded", "older"))
    policy = Policy(("tests.support",), allow_python_exec=True)
    register(served.client.store, recorded, queue, policy)
    register(served.client.store, older, queue, None)
    with served.http("viewer") as http:
        answer = http.get("/workers")
    assert answer.status_code == 200, answer.text
    listed = {worker["id"]: worker for worker in answer.json()["workers"]}
    assert listed[recorded]["policy"] == {
        "modules": ["tests.support"],
        "allow_python_exec": True,
        "allow_shell": False,
    }
    assert listed[older]["policy"] is None  # a worker of a taskq that recorded none
    # The Python client over HTTP reads them back as the store client does.
    with taskq.Client(served.server.url, token=token_of("viewer")) as over_http:
        policies = {worker.id: worker.policy for worker in over_http.workers()}
    assert (policies[recorded], policies[older]) == (policy, None)


def test_a_thousand_jobs_page_by_keyset(served: Served) -> None:
    queue = _queue()
    with served.http() as http:
        answer = http.post("/jobs", json=[_job(queue, args=(n, 0)) for n in range(1000)])
        assert answer.status_code == 201, answer.text
        ids = answer.json()["ids"]
        assert len(ids) == 1000

        seen: list[int] = []
        url: str | None = f"/jobs?queue={queue}&limit=150"
        pages = 0
        while url is not None:
            page = http.get(url)
            assert page.status_code == 200, page.text
            body = page.json()
            seen += [job["id"] for job in body["jobs"]]
            url = body["next"]
            pages += 1
        assert seen == sorted(ids, reverse=True)
        assert pages == 7
        assert http.get("/jobs", params={"limit": 1001}).status_code == 400
        assert http.get("/jobs", params={"stat": "queued"}).status_code == 400
        bad_state = http.get("/jobs", params={"state": "done"})
        assert bad_state.status_code == 400
        assert "query parameter state must be one of" in bad_state.json()["detail"]


def test_a_jobs_relatives_are_read_with_the_read_scope(served: Served) -> None:
    queue = _queue()
    with served.http() as http:
        first = http.post("/jobs", json=_job(queue)).json()["id"]
        later = http.post("/jobs", json={**_job(queue), "after": [first]}).json()["id"]
    with served.http("viewer") as viewer:
        answer = viewer.get(f"/jobs/{later}/relatives")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "parents": [[first, "queued"]],
            "children": [],
            "spawned_by": None,
            "spawned": [],
        }
        assert viewer.get(f"/jobs/{first}/relatives", params={"limit": 1}).json()["children"] == [
            [later, "waiting"]
        ]
        missing = viewer.get("/jobs/987654321/relatives")
        assert (missing.status_code, missing.json()["type"]) == (
            404,
            "urn:taskq:problem:JobNotFound",
        )
        assert viewer.get("/jobs/abc/relatives").status_code == 400
        for params in ({"limit": 0}, {"limit": 10_001}, {"limit": "all"}, {"depth": 2}):
            refused = viewer.get(f"/jobs/{later}/relatives", params=params)
            assert (refused.status_code, refused.json()["type"]) == (
                400,
                "urn:taskq:problem:BadRequest",
            ), params
    with served.http(None) as anonymous:
        assert anonymous.get(f"/jobs/{later}/relatives").status_code == 401


def test_an_idempotency_key_names_one_request(served: Served) -> None:
    queue = _queue()
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}
    with served.http() as http:
        first = http.post("/jobs", json=_job(queue), headers=key)
        again = http.post("/jobs", json=_job(queue), headers=key)
        assert first.status_code == again.status_code == 201
        assert first.json() == again.json()

        other = http.post("/jobs", json=_job(queue, args=(5, 5)), headers=key)
        assert other.status_code == 409
        problem = other.json()
        assert other.headers["content-type"] == "application/problem+json"
        assert problem["type"] == "urn:taskq:problem:IdempotencyConflict"
        assert problem["job_id"] == first.json()["id"]
        assert problem["field"] == "idempotency_key"
        # The body's key and the header's, different: refused, naming both, nothing written.
        both = http.post("/jobs", json={**_job(queue), "idempotency_key": "mine"}, headers=key)
        assert (both.status_code, both.json()["field"]) == (422, "idempotency_key"), both.text
        assert both.json()["detail"] == (
            f"two idempotency keys: {key['Idempotency-Key']!r} in the Idempotency-Key header "
            "and 'mine' in the body; send one of them, or the same in both"
        )
        same = {**_job(queue), "idempotency_key": key["Idempotency-Key"]}
        assert http.post("/jobs", json=same, headers=key).json() == first.json()
        batch = http.post("/jobs", json=[_job(queue), _job(queue)], headers=key)
        batch_again = http.post("/jobs", json=[_job(queue), _job(queue)], headers=key)
        assert batch.json() == batch_again.json()
    assert len(served.client.list(taskq.JobQuery(queue=queue))) == 3


def test_cancel_and_retry(served: Served) -> None:
    queue = _queue()
    with served.http() as http:
        job_id = http.post("/jobs", json=_job(queue)).json()["id"]
        not_ended = http.post(f"/jobs/{job_id}/retry")
        assert not_ended.status_code == 409
        assert not_ended.json()["detail"] == (
            f"job {job_id} (queued): only failed, dead or cancelled jobs are retried"
        )
        cancelled = http.delete(f"/jobs/{job_id}")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "cancelled"
        again = http.delete(f"/jobs/{job_id}")
        assert again.status_code == 409
        assert again.json()["type"] == "urn:taskq:problem:WrongState"
        assert again.json()["detail"] == f"job {job_id} (cancelled): already ended, not cancelled"

        retried = http.post(f"/jobs/{job_id}/retry")
        assert retried.status_code == 200
        assert retried.json()["state"] == "queued"
        pending = http.get(f"/jobs/{job_id}/result", params={"timeout": 0.2})
        assert pending.status_code == 202
        assert pending.json()["finished"] is False

        missing = http.delete("/jobs/999999999")
        assert missing.status_code == 404
        assert missing.json()["detail"] == "no job with id 999999999"
        assert http.get("/jobs/999999999/executions").status_code == 404


def test_cancel_and_retry_of_many_are_one_write(served: Served) -> None:
    queue = _queue()
    with served.http() as http:
        first, second = http.post("/jobs", json=[_job(queue), _job(queue)]).json()["ids"]
        for path in ("/jobs/cancel", "/jobs/retry"):
            unknown = http.post(path, json={"ids": [first, 999999999, second, 0]})
            assert unknown.status_code == 404, unknown.text
            assert unknown.json()["type"] == "urn:taskq:problem:JobNotFound"
            assert unknown.json()["detail"] == "no job with id 999999999"
        assert {job.state for job in served.client.list(taskq.JobQuery(queue=queue))} == {
            JobState.QUEUED
        }

        # An id given twice counts once; a job that cannot move is left out, not refused.
        cancelled = http.post("/jobs/cancel", json={"ids": [first, first]})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json() == {"cancelled": [first], "requested": []}
        again = http.post("/jobs/cancel", json={"ids": [first]})
        assert (again.status_code, again.json()) == (200, {"cancelled": [], "requested": []})
        retried = http.post("/jobs/retry", json={"ids": [second, first]})
        assert (retried.status_code, retried.json()) == (200, {"retried": [first], "revived": []})
        assert served.client.get(first).state is JobState.QUEUED

        for body, field in (
            ({"ids": []}, "ids"),
            ({"ids": [1.5]}, "ids"),
            ({"ids": list(range(1, 1002))}, "ids"),
            ({"ids": [first], "id": first}, "id"),
        ):
            refused = http.post("/jobs/cancel", json=body)
            assert (refused.status_code, refused.json()["field"]) == (422, field), refused.text
        assert http.post("/jobs/retry", content=b"{not json").status_code == 400
        # Not the job "cancel" of /jobs/{job_id}: the path takes POST alone.
        for method in ("GET", "DELETE"):
            wrong = http.request(method, "/jobs/cancel")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
    with served.http("viewer") as viewer:
        assert viewer.post("/jobs/cancel", json={"ids": [first]}).status_code == 403
    assert served.client.get(second).state is JobState.QUEUED


def test_tokens_and_scopes(served: Served) -> None:
    queue = _queue()
    with served.http(None) as anonymous:
        refused = anonymous.post("/jobs", json=_job(queue))
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.get("/jobs").status_code == 401
        assert anonymous.get("/healthz").status_code == 200
        assert anonymous.get("/readyz").status_code == 200
        assert anonymous.get("/openapi.json").json()["openapi"].startswith("3.")
    with served.server.client("stranger") as stranger:
        assert stranger.get("/jobs").status_code == 401
    with served.http("viewer") as viewer:
        assert viewer.get("/jobs", params={"queue": queue}).status_code == 200
        forbidden = viewer.post("/jobs", json=_job(queue))
        assert forbidden.status_code == 403
        assert forbidden.json()["type"] == "urn:taskq:problem:Forbidden"
    with served.http() as scripts:
        assert scripts.patch(f"/queues/{queue}", json={"paused": True}).status_code == 403
    with served.http("ops") as ops:
        paused = ops.patch(f"/queues/{queue}", json={"paused": True, "create": True})
        assert paused.status_code == 200, paused.text
        assert paused.json()["paused"] is True
        limited = ops.patch(f"/queues/{queue}", json={"max_running": 2})
        assert limited.json()["max_running"] == 2
        assert ops.patch("/queues/no-such-queue", json={"paused": True}).status_code == 404
        name = f"nightly-{queue}"
        added = ops.post("/schedules", json={"name": name, "cron": "0 3 * * *", "job": _job(queue)})
        assert added.status_code == 201, added.text
        [listed] = [one for one in ops.get("/schedules").json()["schedules"] if one["name"] == name]
        # The job's parts are JSON values, as GET /jobs has them, not JSON text in a string.
        for schedule in (added.json()["schedule"], listed):
            assert schedule["spec"]["payload"] == {
                "target": "tests.support.jobs:add",
                "args": [1, 2],
                "kwargs": {},
            }
            assert (schedule["spec"]["limits"], schedule["spec"]["labels"]) == ({}, [])
        bad_cron = ops.post(
            "/schedules", json={"name": name, "cron": "63 * * * *", "job": _job(queue)}
        )
        assert bad_cron.status_code in {409, 422}
        assert ops.delete(f"/schedules/{name}").status_code == 204
        assert ops.delete(f"/schedules/{name}").status_code == 404
    assert [stats.paused for stats in served.client.stats() if stats.queue == queue] == [True]


def test_the_submitter_is_the_token_and_its_rate_limit_holds(served: Served) -> None:
    queue = _queue()
    served.client.set_submit_limit("limited", 3, 3600)
    try:
        with served.http("limited") as http:
            claimed = http.post("/jobs", json={**_job(queue), "submitter": "someone-else"})
            assert claimed.status_code == 422
            assert claimed.json()["field"] == "submitter"
            for _ in range(3):
                assert http.post("/jobs", json=_job(queue)).status_code == 201
            refused = http.post("/jobs", json=_job(queue))
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["type"] == "urn:taskq:problem:RateLimited"
            metrics = http.get("/metrics").text
            assert 'taskq_server_submit_refusals_total{submitter="limited"} 1.0' in metrics
        assert {job.submitter for job in served.client.list(taskq.JobQuery(queue=queue))} == {
            "limited"
        }
        assert len(served.client.list(taskq.JobQuery(queue=queue))) == 3
    finally:
        served.client.remove_submit_limit("limited")


def test_bad_input_is_a_4xx(served: Served) -> None:
    queue = _queue()
    with served.http() as http:
        assert http.post("/jobs", content=b"{not json").status_code == 400
        unknown = http.post("/jobs", json={**_job(queue), "priorty": 1})
        assert (unknown.status_code, unknown.json()["field"]) == (422, "priorty")
        bad = http.post("/jobs", json={**_job(queue), "max_attempts": 0})
        assert (bad.status_code, bad.json()["field"]) == (422, "max_attempts")
        for field, value in (("run_at", 1e300), ("limits", {"open_files": 10**30})):
            beyond = http.post("/jobs", json={**_job(queue), field: value})
            assert (beyond.status_code, beyond.json()["field"]) == (422, field), beyond.text
        assert http.post("/jobs", json={"target": "no colon"}).status_code == 422
        assert http.get("/jobs/abc").status_code == 400
        assert http.get(f"/jobs/{2**64}").status_code == 404
        assert http.get("/jobs", params={"before": 2**64}).status_code == 400
        assert http.get("/jobs/1/result", params={"timeout": "soon"}).status_code == 400
        # A bad query parameter is one kind of answer, naming the parameter and what it takes.
        for params, said in (
            ({"state": "bogus"}, "query parameter state must be one of queued, waiting, "),
            ({"limit": 0}, "query parameter limit must be >= 1"),
        ):
            listed = http.get("/jobs", params=params)
            assert (listed.status_code, listed.json()["type"]) == (
                400,
                "urn:taskq:problem:BadRequest",
            ), listed.text
            assert said in listed.json()["detail"]
        text = http.post("/jobs", json="hello")
        assert (text.status_code, text.json()["detail"]) == (
            422,
            'a job is an object, {"target": "pkg.mod:func", ...}, and a batch an array of '
            "them; got a string",
        )
        assert http.get("/nowhere").status_code == 404
        assert http.put("/jobs").status_code == 405
        wrong_type = http.post("/jobs", json={**_job(queue), "timeout": "5x"})
        assert (wrong_type.status_code, wrong_type.json()["detail"]) == (
            422,
            'timeout must be a number or null, got "5x"',
        )
    assert served.client.list(taskq.JobQuery(queue=queue)) == []


def test_an_empty_batch_is_refused_as_a_cancel_of_no_ids_is(served: Served) -> None:
    def newest() -> list[int]:
        return [job.id for job in served.client.list(taskq.JobQuery(limit=1))]

    before = newest()
    with served.http() as http:
        cancel = http.post("/jobs/cancel", json={"ids": []})
        empty = http.post("/jobs", json=[])
        document = http.get("/openapi.json").json()
    assert newest() == before
    assert cancel.status_code == 422, cancel.text
    # The same answer as an empty cancel: a 422 problem, InvalidJob.
    assert (empty.status_code, empty.headers["content-type"], empty.json()["type"]) == (
        cancel.status_code,
        cancel.headers["content-type"],
        cancel.json()["type"],
    )
    assert empty.json()["detail"] == "a batch needs at least one job"
    body = document["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    [batch] = [one for one in body["schema"]["anyOf"] if one.get("type") == "array"]
    assert batch["minItems"] == 1


# Every route of one job reads its id through the same helper.
_ONE_JOB = [
    ("GET", ""),
    ("GET", "/result"),
    ("GET", "/executions"),
    ("GET", "/relatives"),
    ("GET", "/output"),
    ("DELETE", ""),
    ("POST", "/retry"),
]


def test_a_job_id_in_the_path_is_a_whole_number(served: Served) -> None:
    with served.http() as http:
        for text in ("abc", "-1", "1.5", "1e3", "+7", "1_000", "%207"):
            for method, rest in _ONE_JOB:
                refused = http.request(method, f"/jobs/{text}{rest}")
                problem = refused.json()
                assert (refused.status_code, problem["type"], problem["detail"]) == (
                    400,
                    "urn:taskq:problem:BadRequest",
                    f"{unquote(text)!r} in the path is not a job id (a whole number)",
                ), (method, text, rest)
        # A whole number no job has, or can have, is not found, as an id in a body is.
        for text in ("999999999", "0", str(2**64), "9" * 5000):
            for method, rest in _ONE_JOB:
                missing = http.request(method, f"/jobs/{text}{rest}")
                assert (missing.status_code, missing.json()["type"]) == (
                    404,
                    "urn:taskq:problem:JobNotFound",
                ), (method, text[:20], rest)
        document = http.get("/openapi.json").json()
    for method, rest in _ONE_JOB:
        operation = document["paths"][f"/jobs/{{job_id}}{rest}"][method.lower()]
        [parameter] = [each for each in operation["parameters"] if each["in"] == "path"]
        assert parameter["schema"] == {"type": "string", "pattern": "^[0-9]+$"}
        assert "400" in operation["responses"]
    # The Python client over HTTP sends whole numbers only: an unknown one is JobNotFound.
    with (
        taskq.Client(served.server.url, token=token_of("scripts")) as over_http,
        pytest.raises(errors.JobNotFound, match="no job with id 999999999"),
    ):
        over_http.get(999999999)


def test_a_refusal_says_what_to_send_over_http(served: Served) -> None:
    """The way out a refusal gives is the body's member, not the CLI's flag or Python's argument."""
    queue = _queue()
    schedule = {"name": f"nightly-{queue}", "cron": "0 3 * * *", "job": _job(queue)}
    with served.http("ops") as ops:
        unknown_queue = ops.patch(f"/queues/{queue}", json={"paused": True})
        assert (unknown_queue.status_code, unknown_queue.json()["detail"]) == (
            404,
            f"no queue named '{queue}': it has no jobs and no settings; to change it all the "
            'same, ask to create it ("create": true)',
        )
        assert ops.post("/schedules", json=schedule).status_code == 201
        taken = ops.post("/schedules", json={**schedule, "cron": "0 4 * * *"})
        assert (taken.status_code, taken.json()["detail"]) == (
            409,
            f"schedule 'nightly-{queue}' already exists; to replace it, ask to "
            '("replace": true), or remove it first',
        )
        assert ops.delete(f"/schedules/nightly-{queue}").status_code == 204
    token_named = "; the submitter is the name of the request's token and cannot be sent"
    with served.http() as http:
        for body, detail in [
            ({**_job(queue), "submitter": "someone"}, "unknown field submitter"),
            (
                [_job(queue), {**_job(queue), "submitter": "someone"}],
                "job 1: unknown field submitter",
            ),
        ]:
            sent = http.post("/jobs", json=body)
            assert (sent.status_code, sent.json()["detail"]) == (422, detail + token_named)
        for method, path, wanted in [
            ("POST", "/jobs", "a JSON object or array"),
            ("POST", "/jobs/cancel", "a JSON object"),
        ]:
            empty = http.request(method, path, content=b"")
            assert (empty.status_code, empty.json()["detail"]) == (
                400,
                f"the body is empty; {wanted} is expected",
            )
    assert served.client.list(taskq.JobQuery(queue=queue)) == []


def test_a_refused_setting_is_an_invalid_setting(served: Served) -> None:
    queue = _queue()
    title = "A setting was refused before anything was written (a queue's limit, a schedule's "
    setting = ("urn:taskq:problem:InvalidSetting", title + "timing...).")
    with served.http("ops") as ops:
        ops.patch(f"/queues/{queue}", json={"paused": False, "create": True}).raise_for_status()
        for method, path, body, field in [
            ("PATCH", f"/queues/{queue}", {"max_running": -1}, "max_running"),
            ("PATCH", f"/queues/{queue}", {"rate_limit": 0}, "rate_limit"),
            ("POST", "/store/prune", {"older_than": 0}, "older_than"),
            ("PATCH", "/store/retention", {"failed_seconds": 0}, "failed_seconds"),
            ("PUT", "/submit-limits/nobody", {"rate": 0, "period": 1}, "rate"),
            (
                "POST",
                "/schedules",
                {"name": queue, "cron": "99 * * * *", "job": _job(queue)},
                "cron",
            ),
        ]:
            refused = ops.request(method, path, json=body)
            problem = refused.json()
            assert refused.status_code == 422, refused.text
            assert (problem["type"], problem["title"], problem["field"]) == (*setting, field)
    assert [stats.max_running for stats in served.client.stats() if stats.queue == queue] == [None]
    assert "nobody" not in {limit.submitter for limit in served.client.submit_limits()}
    assert queue not in {schedule.name for schedule in served.client.schedules()}
    assert served.client.retention().failed_seconds != 0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, parsed by the Prometheus text parser, by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_match_the_store_after_500_jobs(served: Served, workers: WorkerFleet) -> None:
    queue = _queue()
    workers.start(served.store_url, worker={"queues": [queue], "concurrency": 4})
    jobs = [_job(queue, args=(n, 1)) for n in range(490)]
    jobs += [{**_job(queue, "tests.support.jobs:fail", ["on purpose"]), "max_attempts": 1}] * 10
    with served.http() as http:
        assert http.post("/jobs", json=jobs).status_code == 201

        def finished() -> bool:
            [stats] = [stats for stats in served.client.stats() if stats.queue == queue]
            return sum(stats.counts.get(state, 0) for state in FINISHED_STATES) == 500

        assert wait_until(finished, 120, interval=0.2)
        workers.close()
        samples = _samples(http.get("/metrics").text)

    [stats] = [stats for stats in served.client.stats() if stats.queue == queue]
    for state in JobState:
        labels = (("queue", queue), ("state", state.value))
        assert samples[("taskq_jobs", labels)] == stats.counts.get(state, 0)
    assert samples[("taskq_jobs", (("queue", queue), ("state", "succeeded")))] == 490
    assert (
        samples[("taskq_jobs", (("queue", queue), ("state", "failed")))]
        + samples[("taskq_jobs", (("queue", queue), ("state", "dead")))]
        == 10
    )

    totals = served.client.execution_stats()
    for outcome, seen in totals.run_seconds.items():
        assert samples[("taskq_attempts_finished_total", (("outcome", outcome),))] == seen.count
        assert samples[("taskq_attempt_run_seconds_count", (("outcome", outcome),))] == seen.count
    assert sum(seen.count for seen in totals.run_seconds.values()) >= 500
    assert samples[("taskq_job_pickup_seconds_count", ())] == totals.pickup_seconds.count

    by_state: dict[str, int] = {}
    for worker in served.client.workers():
        by_state[worker.state] = by_state.get(worker.state, 0) + 1
    for state, count in by_state.items():
        assert samples[("taskq_workers", (("state", state),))] == count
    assert samples[("taskq_store_up", ())] == 1
    assert samples[("taskq_store_leader_known", ())] == 1


@pytest.mark.rqlite
def test_a_store_down_is_503_with_retry_after(tmp_path: Path) -> None:
    """rqlite: the only node killed. Every store read or write is a 503; the process lives on."""
    config = write_server_config(tmp_path / "config.toml", TOKENS)
    with running_cluster(tmp_path / "rqlite", size=1) as cluster:
        url = cluster.store_url(retries="0", timeout="2")
        with (
            running_server(url, config, tmp_path / "serve.log") as server,
            server.client("scripts") as http,
        ):
            job_id = http.post("/jobs", json=_job(_queue())).json()["id"]
            cluster.kill_node(cluster.nodes[0])
            for answer in (
                http.get(f"/jobs/{job_id}"),
                http.post("/jobs", json=_job(_queue())),
                http.get("/readyz"),
            ):
                assert answer.status_code == 503, answer.text
                assert int(answer.headers["retry-after"]) >= 1
                assert answer.json()["type"].startswith("urn:taskq:problem:Store")
            assert http.get("/healthz").status_code == 200
            samples = _samples(http.get("/metrics").text)
            assert samples[("taskq_store_up", ())] == 0
            assert samples[("taskq_store_node_up", (("node", cluster.nodes[0].base_url),))] == 0


def test_a_locked_sqlite_store_is_503(tmp_path: Path) -> None:
    """SQLite: a write lock held past the busy timeout; the write is refused, nothing applied."""
    path = tmp_path / "taskq.db"
    config = write_server_config(tmp_path / "config.toml", TOKENS)
    with running_server(
        f"sqlite://{path}?busy_timeout_ms=200", config, tmp_path / "serve.log"
    ) as server:
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")
            with server.client("scripts") as http:
                answer = http.post("/jobs", json=_job(_queue()))
                assert answer.status_code == 503, answer.text
                assert answer.headers["retry-after"] == "1"
                assert answer.json()["type"] == "urn:taskq:problem:StoreUnavailable"
        finally:
            locker.close()
        with server.client("scripts") as http:
            assert http.post("/jobs", json=_job(_queue())).status_code == 201


def test_serve_refuses_an_unsafe_configuration(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    open_server = taskq_command("serve", "--listen", "0.0.0.0:8080", store=store)
    one_error_line(open_server, 2, "no [[server.tokens]] configured", "loopback")
    half_tls = taskq_command(
        "serve", "--listen", "127.0.0.1:8080", "--tls-cert", "c.pem", store=store
    )
    one_error_line(half_tls, 2, "tls_key")
    bad_listen = taskq_command("serve", "--listen", "8080", store=store)
    one_error_line(bad_listen, 2, "HOST:PORT")
    bad_port = taskq_command("serve", "--listen", "127.0.0.1:99999", store=store)
    one_error_line(bad_port, 2, "'127.0.0.1:99999'", "the port must be 1 to 65535")


def test_serve_names_the_file_or_the_address_it_cannot_use(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    [port] = free_ports(1)
    missing = taskq_command(
        *("serve", "--listen", f"127.0.0.1:{port}"),
        *("--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"),
        store=store,
    )
    one_error_line(missing, 2, "TLS certificate /nonexistent.pem", "No such file or directory")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    not_pem = taskq_command(
        *("serve", "--listen", f"127.0.0.1:{port}"),
        *("--tls-cert", str(junk), "--tls-key", str(junk)),
        store=store,
    )
    one_error_line(not_pem, 2, f"TLS certificate {junk} holds no PEM certificate")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        in_use = taskq_command("serve", "--listen", f"127.0.0.1:{port}", store=store)
    one_error_line(in_use, 2, f"cannot listen on 127.0.0.1:{port}", "Address already in use")
    assert not (tmp_path / "taskq.db").exists()


def test_serve_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    hidden = "import sys; sys.modules['uvicorn'] = None; from taskq.cli.main import main; "
    ran = subprocess.run(
        [sys.executable, "-c", hidden + "sys.exit(main(sys.argv[1:]))", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"TASKQ_STORE": f"sqlite://{tmp_path / 'taskq.db'}", "PATH": os.environ["PATH"]},
    )
    assert ran.returncode == 2, ran
    assert ran.stderr == (
        "taskq: error: taskq serve needs the server extra: "
        "pip install '.[server]' in taskq's checkout (scripts/taskq installs it)\n"
    )


def test_serve_over_tls(tmp_path: Path) -> None:
    tls = make_test_certificates(tmp_path / "tls")
    config = write_server_config(tmp_path / "config.toml", TOKENS)
    store = f"sqlite://{tmp_path / 'taskq.db'}"
    with running_server(store, config, tmp_path / "serve.log", tls=tls) as server:
        assert server.url.startswith("https://")
        with server.client("scripts") as http:
            assert http.post("/jobs", json=_job(_queue())).status_code == 201
        with httpx.Client(base_url=server.url) as untrusting, pytest.raises(httpx.ConnectError):
            untrusting.get("/healthz")
        # The Python client: a certificate it does not trust is said so at once, with the way
        # to trust it, not taken for a server that does not answer.
        token = token_of("scripts")
        with (
            taskq.Client(server.url, token=token) as untrusting,
            pytest.raises(errors.ConfigError) as untrusted,
        ):
            untrusting.stats()
        assert str(untrusted.value) == (
            f"taskq serve at {server.url}: its TLS certificate is not trusted (unable to get "
            "local issuer certificate); pass the certificate that signed it (your CA's, or a "
            'self-signed server\'s own) as taskq.Client(url, ca="path/to/cert.pem")'
        )
        with taskq.Client(server.url, token=token, ca=tls.ca) as trusting:
            assert trusting.submit("tests.support.jobs:add", 1, 2, unchecked=True).id > 0
        # Plain HTTP to it: the server hangs up without a word, then takes a TLS handshake, so
        # the URL is said to be wrong at once, not asked again until the call's time runs out;
        # a write too, not taken for one that may have been applied.
        plain = server.url.replace("https://", "http://")
        use_https = (
            f"taskq serve at {plain}: the server speaks HTTPS (it hung up on plain HTTP and "
            f"took a TLS handshake); use {server.url}"
        )
        with taskq.Client(plain, token=token, timeout=30) as in_plain:
            with pytest.raises(errors.ConfigError) as read:
                in_plain.stats()
            assert str(read.value) == use_https
            with pytest.raises(errors.ConfigError) as written:
                in_plain.submit("tests.support.jobs:add", 1, 2, unchecked=True)
            assert str(written.value) == use_https
            # A body the server has not read when it hangs up: the kernel resets the
            # connection instead of closing it, and that is the same wrong URL.
            with pytest.raises(errors.ConfigError) as reset:
                in_plain.submit("tests.support.jobs:echo", "x" * 1_000_000, unchecked=True)
            assert str(reset.value) == use_https

        async def read_awaited() -> None:
            async with taskq.AsyncClient(plain, token=token, timeout=30) as awaiting:
                await awaiting.stats()

        with pytest.raises(errors.ConfigError) as awaited:
            anyio.run(read_awaited)
        assert str(awaited.value) == use_https
