"""The real ``taskq`` command, run as a subprocess against both stores.

Each test runs against a SQLite file of its own and against the session's
3-node rqlite cluster, where tests keep apart by unique queue, schedule and
submitter names. Jobs that must finish are run by a real ``taskq-worker``
(the acceptance tier's ``workers`` fixture stops it by pid).
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import pytest

from taskq.broker.client.client import default_submitter
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.stores.store import Statement, Store
from taskq.broker.worker_policy import Policy
from taskq.cli.main import build_parser
from tests.support import reports
from tests.support.cli_runs import ok, one_error_line, taskq
from tests.support.registered_workers import register
from tests.support.rqlite_cluster import STORE_KINDS
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.jobs"
UNREACHABLE = "rqlite://127.0.0.1:1"
NO_SUCH_JOB = 987_654_321


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each kind: a SQLite file of this test's own, or the shared cluster."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    return str(request.getfixturevalue("rqlite_cluster").url)


@pytest.fixture
def broker(url: str) -> Iterator[Store]:
    """The same store opened through the broker's API, to check what a command did."""
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def queue() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def submit(url: str, queue: str, target: str, *args: str) -> int:
    return int(
        ok("submit", "--unchecked", f"{JOBS}:{target}", *args, "--queue", queue, store=url).out
    )


# -- jobs --------------------------------------------------------------------------------


def test_status_of_a_failed_job_prints_its_traceback(url: str, queue: str, broker: Store) -> None:
    job_id = submit(url, queue, "add", "1", "2", "--max-attempts", "1")
    [claimed] = plan.run(broker, job_claim("cli-probe", [queue], limit=1, lease_seconds=30))
    trace = 'Traceback (most recent call last):\n  File "lab.py", line 3\nValueError: bad pixel\n'
    error = {"type": "ValueError", "message": "bad pixel", "traceback": trace}
    plan.run(broker, reports.report_one(reports.failed(claimed.lease, error, retryable=False)))

    status = ok("status", str(job_id), store=url).out
    assert status.endswith("\n\n" + trace), "the traceback whole, after the fields"
    assert status.count("bad pixel") == 1, "the error said once: the traceback's last line"
    assert "Traceback" not in ok("status", str(submit(url, queue, "add", "3", "4")), store=url).out


def test_a_job_handed_back_shows_no_worker_but_logs_keep_its_attempt(
    url: str, queue: str, broker: Store
) -> None:
    """What a drain hands back is queued, held by no worker: status and jobs say none."""
    job_id = submit(url, queue, "add", "1", "2")
    [claimed] = plan.run(broker, job_claim("cli-draining", [queue], limit=1, lease_seconds=30))
    plan.run(broker, reports.report_one(reports.released(claimed.lease)))

    fields = dict(
        line.split(maxsplit=1) for line in ok("status", str(job_id), store=url).out.splitlines()
    )
    assert fields["state"] == "queued"
    assert {"worker", "started"} & set(fields) == set(), fields
    [header, row] = ok("jobs", "--queue", queue, store=url).out.splitlines()
    assert (header.split()[-1], row.split()[-1]) == ("WORKER", "-")
    # The attempt it gave back keeps its worker.
    first = ok("logs", str(job_id), store=url).out.splitlines()[0]
    assert first.startswith("attempt 1 of 3  released (handed back unrun or unfinished")
    assert first.endswith("  worker cli-draining")


def test_submit_with_options_then_look_cancel_and_retry(url: str, queue: str) -> None:
    before = time.time()
    ran = ok(
        *("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, "--priority", "5"),
        *("--delay", "10m", "--max-attempts", "2", "--timeout", "30s", "--memory", "256MiB"),
        *("--cpu", "5", "--label", "gpu", "--label", "big", "--key", f"key-{queue}"),
        store=url,
    )
    job_id = int(ran.out)
    job = ok("status", str(job_id), "--json", store=url).json()
    assert job["state"] == "queued"
    assert job["queue"] == queue
    assert job["priority"] == 5
    assert job["payload"] == {"target": f"{JOBS}:add", "args": [1, 2], "kwargs": {}}
    assert before + 590 < job["run_at"] < time.time() + 610
    assert job["max_attempts"] == 2
    assert job["timeout"] == 30
    assert job["limits"] == {"memory_bytes": "256MiB", "cpu_seconds": 5}
    assert job["labels"] == ["big", "gpu"]
    assert job["submitter"] == default_submitter()

    status = ok("status", str(job_id), store=url).out
    assert "queued" in status
    assert "in 9m" in status or "in 10m" in status
    assert f"{JOBS}:add(1, 2)" in status

    again = ok(
        *("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, "--priority", "5"),
        *("--delay", "10m", "--max-attempts", "2", "--timeout", "30s", "--memory", "256MiB"),
        *("--cpu", "5", "--label", "gpu", "--label", "big", "--key", f"key-{queue}"),
        store=url,
    )
    assert int(again.out) == job_id, "the same request under the same key names the same job"
    other = taskq(
        "submit",
        "--unchecked",
        f"{JOBS}:add",
        "1",
        "2",
        "--queue",
        queue,
        "--key",
        f"key-{queue}",
        store=url,
    )
    # Not a usage error: the key is taken in this store (exit 1, as a runtime error).
    one_error_line(other, 1, f"key-{queue}", "nothing was written")

    at = ok(
        "submit",
        "--unchecked",
        f"{JOBS}:add",
        "3",
        "4",
        "--queue",
        queue,
        "--at",
        "2030-01-02T03:04",
        store=url,
    )
    at_job = ok("status", at.out.strip(), "--json", store=url).json()
    assert at_job["run_at"] == pytest.approx(datetime(2030, 1, 2, 3, 4).timestamp(), abs=0.5)

    kwargs = ok(
        *(
            "submit",
            "--unchecked",
            f"{JOBS}:add",
            "--kwargs",
            '{"a": 1, "b": 2}',
            "--queue",
            queue,
            "--json",
        ),
        store=url,
    ).json()
    listed = ok("jobs", "--queue", queue, "--json", store=url).json()
    assert [job["id"] for job in listed] == [kwargs["id"], int(at.out), job_id]
    assert listed[0]["payload"]["kwargs"] == {"a": 1, "b": 2}

    table = ok("jobs", "--queue", queue, store=url).out.splitlines()
    assert table[0].split()[:3] == ["ID", "STATE", "QUEUE"]
    assert len(table) == 4
    page = taskq("jobs", "--queue", queue, "--limit", "1", store=url)
    assert page.code == 0
    assert len(page.out.splitlines()) == 2
    assert f"--before {kwargs['id']}" in page.err
    older = ok("jobs", "--queue", queue, "--before", str(kwargs["id"]), "--json", store=url)
    assert [job["id"] for job in older.json()] == [int(at.out), job_id]
    assert ok("jobs", "--queue", queue, "--state", "running", "--json", store=url).json() == []
    mine = ok("jobs", "--submitter", default_submitter(), "--queue", queue, "--json", store=url)
    assert len(mine.json()) == 3

    cancelled = ok("cancel", str(job_id), store=url)
    assert cancelled.out.strip() == f"job {job_id}: cancelled"
    assert ok("status", str(job_id), "--json", store=url).json()["state"] == "cancelled"
    # The cancel went through: nothing is still asked of the job.
    assert "state      cancelled\n" in ok("status", str(job_id), store=url).out
    again = taskq("cancel", str(job_id), store=url)
    one_error_line(again, 1, f"job {job_id} (cancelled): already ended, not cancelled")
    retried = ok("retry", str(job_id), "--json", store=url).json()
    assert retried == [{"id": job_id, "outcome": "requeued"}]
    assert ok("status", str(job_id), "--json", store=url).json()["state"] == "queued"
    not_ended = taskq("retry", str(job_id), store=url)
    one_error_line(not_ended, 1, f"job {job_id} (queued): only failed, dead or cancelled")

    mixed = taskq("cancel", str(job_id), str(NO_SUCH_JOB), store=url)
    assert mixed.code == 1
    assert mixed.out.strip() == f"job {job_id}: cancelled"
    one_error_line(mixed, 1, f"no job with id {NO_SUCH_JOB} (taskq jobs lists the newest)")
    # The client refuses the lot for the unknown id; the command still moves the others.
    mixed = taskq("retry", str(NO_SUCH_JOB), str(job_id), store=url)
    assert (mixed.code, mixed.out.strip()) == (1, f"job {job_id}: queued again")
    one_error_line(mixed, 1, f"no job with id {NO_SUCH_JOB}")


def test_wait_prints_the_result_and_logs_show_the_attempts(
    url: str, queue: str, workers: WorkerFleet
) -> None:
    worker = workers.start(url, worker={"queues": [queue]})

    ran = ok(
        "submit", "--unchecked", f"{JOBS}:add", "2", "3", "--queue", queue, "--wait", store=url
    )
    assert ran.out == "5\n"
    said = ok(
        "submit",
        "--unchecked",
        f"{JOBS}:say_and_return",
        '"hello"',
        "--queue",
        queue,
        "--json",
        store=url,
    )
    said_id = said.json()["id"]
    assert ok("result", str(said_id), "--wait", "--timeout", "60", store=url).out == '"hello"\n'
    as_json = ok("result", str(said_id), "--json", store=url).json()
    assert as_json["state"] == "succeeded"
    assert as_json["result"] == "hello"

    failed = taskq(
        *(
            "submit",
            "--unchecked",
            f"{JOBS}:fail",
            '"boom"',
            "--queue",
            queue,
            "--max-attempts",
            "1",
        ),
        *("--wait", "--wait-timeout", "60s"),
        store=url,
    )
    assert failed.out == ""
    one_error_line(failed, 1, "dead after 1 attempt", "JobFailed: boom")
    failed_id = ok("jobs", "--queue", queue, "--state", "dead", "--json", store=url).json()[0]["id"]
    one_error_line(taskq("result", str(failed_id), store=url), 1, "JobFailed: boom")

    logs = ok("logs", str(failed_id), store=url).out
    assert "attempt 1 of 1  error" in logs
    assert f"worker {worker.worker_id}" in logs
    assert "error: tests.support.jobs.JobFailed: boom" in logs
    assert "peak memory" in logs
    said_logs = ok("logs", str(said_id), store=url).out
    assert "succeeded" in said_logs
    assert "log tail:\n    hello" in said_logs
    attempts = ok("logs", str(failed_id), "--json", store=url).json()
    assert [(a["attempt"], a["outcome"], a["worker_id"]) for a in attempts] == [
        (1, "error", worker.worker_id)
    ]

    by_worker = ok("jobs", "--worker", worker.worker_id, "--json", store=url).json()
    assert {job["id"] for job in by_worker} >= {said_id, failed_id}

    listed = ok("workers", "--json", store=url).json()
    mine = next(entry for entry in listed if entry["id"] == worker.worker_id)
    # By the name taskq workers shows as well: every worker of that name.
    by_name = ok("jobs", "--worker", mine["name"], "--json", store=url).json()
    assert {job["id"] for job in by_name} >= {said_id, failed_id}
    assert mine["queues"] == [queue]
    assert mine["pid"] == worker.pid
    assert mine["state"] == "active"
    table = ok("workers", store=url).out
    assert worker.worker_id in table
    assert queue in table

    stats = ok("stats", "--json", store=url).json()
    assert set(stats) == {"queues", "totals", "throughput"}
    assert stats["totals"]["succeeded"] >= 2
    assert stats["totals"]["dead"] >= 1
    assert sum(bucket["outcomes"].get("succeeded", 0) for bucket in stats["throughput"]) >= 2
    text = ok("stats", store=url).out
    assert "finished attempts per minute" in text
    assert "succeeded" in text


def test_a_paused_queue_keeps_its_job_queued_until_resumed(
    url: str, queue: str, broker: Store, workers: WorkerFleet
) -> None:
    # Paused before its first job: the queue does not exist yet, so it is created.
    assert "paused" in ok("pause", queue, "--create", store=url).out
    entry = next(q for q in ok("queues", "--json", store=url).json() if q["queue"] == queue)
    assert entry["paused"] is True
    job_id = submit(url, queue, "add", "20", "22")
    rows = ok("queues", store=url).out.splitlines()
    row = next(line for line in rows if line.startswith(queue + " "))
    assert row.split()[1:3] == ["paused", "1"], "paused, and one job queued"

    probe = plan.run(broker, job_claim("cli-probe", [queue], limit=1, lease_seconds=5))
    assert probe == [], "a claim through the broker skips the paused queue"
    worker = workers.start(url, worker={"queues": [queue]})
    time.sleep(1.5)  # many idle polls (every 0.1 s) of the worker
    job = ok("status", str(job_id), "--json", store=url).json()
    assert (job["state"], job["attempts"]) == ("queued", 0)
    # --wait-timeout: the spelling submit --wait takes, the same option as --timeout.
    waited = taskq("result", str(job_id), "--wait", "--wait-timeout", "1s", store=url)
    one_error_line(waited, 1, f"job {job_id} is still queued after 1 s")
    not_yet = taskq("result", str(job_id), store=url)
    one_error_line(not_yet, 1, "still queued", "--wait")
    # A wait long enough says a few seconds in why the job does not start, and waits on.
    noted = taskq("result", str(job_id), "--wait", "--wait-timeout", "5s", store=url)
    assert noted.code == 1
    assert (
        f"taskq: job {job_id} is still queued: queue {queue!r} is paused "
        f"(taskq resume {queue} lets its jobs start)"
    ) in noted.err.splitlines()

    assert ok("resume", queue, store=url).out.strip() == f"queue {queue} resumed"
    assert ok("result", str(job_id), "--wait", "--timeout", "60", store=url).out == "42\n"
    logs = ok("logs", str(job_id), "--json", store=url).json()
    assert [attempt["worker_id"] for attempt in logs] == [worker.worker_id]


def test_pausing_or_resuming_an_unknown_queue_is_an_error_unless_created(
    url: str, queue: str
) -> None:
    for action in ("pause", "resume"):
        refused = taskq(action, queue, store=url)
        one_error_line(refused, 1, f"no queue named '{queue}'", "--create")
    assert queue not in {q["queue"] for q in ok("queues", "--json", store=url).json()}
    ok("resume", queue, "--create", store=url)
    paused = ok("pause", queue, store=url).out
    assert paused.startswith(f"queue {queue} paused")
    assert paused.rstrip().endswith(f"until 'taskq resume {queue}'")


# -- queues and limits ------------------------------------------------------------------------


def test_queue_limits_are_set_shown_and_lifted(url: str, queue: str) -> None:
    # A queue with no jobs and no settings is a misspelt name, unless created on purpose.
    one_error_line(taskq("limit", queue, "--max-running", "2", store=url), 1, "--create")
    one_error_line(taskq("limit", queue, store=url), 1, f"no queue named '{queue}'")
    assert queue not in {q["queue"] for q in ok("queues", "--json", store=url).json()}
    assert ok("limit", queue, "--rate", "none", "--create", store=url).out.strip() == (
        f"queue {queue}: max running -, rate -"
    )
    assert ok("limit", queue, store=url).out.strip() == f"queue {queue}: max running -, rate -"
    shown = ok("limit", queue, "--max-running", "2", "--rate", "100/1s", store=url).out
    assert shown.strip() == f"queue {queue}: max running 2, rate 100/1s"
    ok("limit", queue, "--rate", "1000/1m", store=url)
    assert ok("limit", queue, "--json", store=url).json() == {
        "queue": queue,
        "max_running": 2,
        "rate_limit": 1000.0,
        "rate_period": 60.0,
    }
    entry = next(q for q in ok("queues", "--json", store=url).json() if q["queue"] == queue)
    assert (entry["max_running"], entry["rate_limit"], entry["rate_period"]) == (2, 1000.0, 60.0)
    assert ok("limit", queue, "--rate", "none", store=url).out.strip() == (
        f"queue {queue}: max running 2, rate -"
    )
    lifted = ok("limit", queue, "--max-running", "none", "--json", store=url).json()
    assert (lifted["max_running"], lifted["rate_limit"]) == (None, None)
    # Its settings all lifted and no jobs: gone, as if never set up.
    assert queue not in {q["queue"] for q in ok("queues", "--json", store=url).json()}

    bad = taskq("limit", queue, "--rate", "5/fortnight", store=url)
    one_error_line(bad, 2, "--rate", "N/PERIOD")
    one_error_line(taskq("limit", queue, "--max-running", "-1", store=url), 2)


def test_submit_limit_refuses_the_submitter_over_its_rate(url: str, queue: str) -> None:
    me = default_submitter()
    try:
        assert ok("submit-limit", me, "2/1m", store=url).out.strip() == (
            f"submitter {me}: at most 2/1m"
        )
        listed = ok("submit-limit", "--json", store=url).json()
        assert {"submitter": me, "rate": 2.0, "period": 60.0} in listed
        assert me in ok("submit-limit", store=url).out
        submit(url, queue, "add", "1", "1")
        submit(url, queue, "add", "1", "1")
        refused = taskq(
            "submit", "--unchecked", f"{JOBS}:add", "1", "1", "--queue", queue, store=url
        )
        one_error_line(refused, 1, me, "nothing was written", "retry in")
        assert len(ok("jobs", "--queue", queue, "--json", store=url).json()) == 2
    finally:
        removed = taskq("submit-limit", me, "--remove", store=url)
    assert removed.code == 0, removed
    assert "no limit of its own" in removed.out
    submit(url, queue, "add", "1", "1")
    one_error_line(taskq("submit-limit", me, store=url), 2, "--remove")


# -- schedules ---------------------------------------------------------------------------------


def test_schedules_are_added_listed_paused_resumed_and_removed(url: str, queue: str) -> None:
    # No worker declares the jobs named: each schedule is added unchecked.
    cron, every = f"{queue}-cron", f"{queue}-every"
    try:
        added = ok(
            *("schedule", "add", "--unchecked", cron, "--cron", "*/5 * * * *"),
            *(f"{JOBS}:add", "1", "2", "--queue", queue, "--timezone", "Europe/Berlin"),
            store=url,
        ).out
        assert added.startswith(f"schedule {cron}: Every fifth minute")
        assert "(Europe/Berlin); next run" in added
        assert added.rstrip().endswith(", this machine's time")
        ok(
            *("schedule", "add", "--unchecked", every, "--every", "90s", f"{JOBS}:add", "3", "4"),
            *("--queue", queue, "--skip-missed", "--max-attempts", "1"),
            store=url,
        )
        listed = {s["name"]: s for s in ok("schedule", "list", "--json", store=url).json()}
        assert listed[cron]["timing"]["cron"] == "*/5 * * * *"
        assert listed[cron]["timing"]["timezone"] == "Europe/Berlin"
        assert listed[cron]["next_fire_at"] % 300 == 0
        assert listed[cron]["next_fire_at"] > time.time() - 1
        assert listed[cron]["spec"]["payload"]["args"] == [1, 2]
        assert listed[cron]["catch_up"] == "once"
        assert listed[every]["timing"]["every_seconds"] == 90
        assert listed[every]["catch_up"] == "skip"
        assert listed[every]["description"] == "every 1m30s"
        table = ok("schedule", "list", store=url).out
        row = next(line for line in table.splitlines() if line.startswith(every + " "))
        assert "active" in row
        assert "every 1m30s" in row
        assert f"{JOBS}:add(3, 4)" in row

        assert ok("schedule", "pause", cron, store=url).out.strip() == f"schedule {cron} paused"
        paused = {s["name"]: s for s in ok("schedule", "list", "--json", store=url).json()}
        assert paused[cron]["paused"] is True
        table = ok("schedule", "list", store=url).out
        row = next(line for line in table.splitlines() if line.startswith(cron + " "))
        assert "- (paused)" in row  # a paused schedule fires no next run
        assert ok("schedule", "resume", cron, store=url).out.strip() == f"schedule {cron} resumed"

        bad_cron = ("--cron", "61 * * * *", "m:f")
        bad = taskq("schedule", "add", "--unchecked", f"{queue}-bad", *bad_cron, store=url)
        one_error_line(bad, 2, "bad cron expression '61 * * * *'")
        zone = taskq(
            *("schedule", "add", "--unchecked", f"{queue}-bad", "--every", "1m", "m:f"),
            *("--timezone", "Mars/Olympus"),
            store=url,
        )
        one_error_line(zone, 2, "unknown time zone 'Mars/Olympus'")
        both = taskq(
            "schedule",
            "add",
            "--unchecked",
            f"{queue}-bad",
            "--every",
            "1m",
            "--cron",
            "* * * * *",
            "m:f",
            store=url,
        )
        one_error_line(both, 2, "not allowed with")
        names = {s["name"] for s in ok("schedule", "list", "--json", store=url).json()}
        assert f"{queue}-bad" not in names

        assert ok("schedule", "remove", cron, store=url).out.strip() == f"schedule {cron} removed"
        gone = taskq("schedule", "remove", cron, store=url)
        one_error_line(gone, 1, f"no schedule named '{cron}'")
        one_error_line(taskq("schedule", "pause", cron, store=url), 1, "no schedule")
    finally:
        for name in (cron, every):
            taskq("schedule", "remove", name, store=url)


def test_a_taken_schedule_name_is_replaced_only_when_asked(url: str, queue: str) -> None:
    name = f"{queue}-taken"
    add = ("schedule", "add", "--unchecked", name, f"{JOBS}:add", "1", "2", "--queue", queue)
    try:
        ok(*add, "--every", "1m", store=url)
        # Exactly as it stands: nothing to replace, so no error (a script may run twice).
        assert ok(*add, "--every", "1m", store=url).out.startswith(f"schedule {name}: every 1m")
        taken = taskq(*add, "--every", "2m", store=url)
        one_error_line(taken, 1, f"schedule '{name}' already exists", "--replace")
        replaced = ok(*add, "--every", "2m", "--replace", store=url).out
        assert replaced.startswith(f"schedule {name} replaced: every 2m")
        listed = {s["name"]: s for s in ok("schedule", "list", "--json", store=url).json()}
        assert listed[name]["timing"]["every_seconds"] == 120
    finally:
        taskq("schedule", "remove", name, store=url)


# -- the store ----------------------------------------------------------------------------------


def test_cluster_describes_the_store(
    url: str, broker: Store, request: pytest.FixtureRequest
) -> None:
    described = ok("cluster", "--json", store=url).json()
    text = ok("cluster", store=url).out
    if url.startswith("sqlite"):
        assert described["kind"] == "embedded"
        assert [node["id"] for node in described["nodes"]] == ["embedded"]
        assert "embedded SQLite file" in text
    else:
        cluster = request.getfixturevalue("rqlite_cluster")
        assert described["kind"] == "rqlite"
        assert len(described["nodes"]) == 3
        assert sum(node["leader"] for node in described["nodes"]) == 1
        assert all(node["reachable"] for node in described["nodes"])
        assert "3 node(s), 3 reachable, leader" in text
        assert cluster.leader().http_addr in text
    assert described["schema_version"] >= 1


def _cell(table: str, row: str, column: str) -> str:
    """The text under ``column`` in the line of ``table`` that names ``row`` (cells are two
    spaces apart at least)."""
    header, *lines = table.splitlines()
    start = header.index(column)
    [line] = [line for line in lines if row in line.split()]
    return line[start:].split("  ")[0]


def test_workers_shows_what_each_worker_runs(url: str, queue: str, broker: Store) -> None:
    recorded, older = (f"{queue}-{which}" for which in ("recorded", "older"))
    register(broker, recorded, queue, Policy(("lab.images", "lab.sims"), allow_shell=True))
    register(broker, older, queue, None)  # a worker of a taskq that recorded no policy
    table = ok("workers", store=url).out
    assert _cell(table, recorded, "RUNS") == "lab.images,lab.sims +shell"
    assert _cell(table, older, "RUNS") == "-"
    listed = {worker["id"]: worker for worker in ok("workers", "--json", store=url).json()}
    assert listed[recorded]["policy"] == {
        "modules": ["lab.images", "lab.sims"],
        "allow_python_exec": False,
        "allow_shell": True,
    }
    assert listed[older]["policy"] is None


def test_a_stopped_workers_up_is_how_long_it_ran(url: str, queue: str, broker: Store) -> None:
    worker = f"{queue}-gone"
    register(broker, worker, queue, None)
    # It started an hour ago, and stopped half an hour later.
    broker.execute(
        [
            Statement(
                "UPDATE workers SET state = 'stopped', started_at = heartbeat_at - 3600, "
                "heartbeat_at = heartbeat_at - 1800 WHERE id = :id",
                {"id": worker},
            )
        ]
    )
    assert _cell(ok("workers", "--all", store=url).out, worker, "UP") == "30m00s"


def test_prune_deletes_finished_jobs_past_the_retention(url: str, queue: str) -> None:
    job_id = submit(url, queue, "add", "1", "1")
    ok("cancel", str(job_id), store=url)
    kept = ok("prune", store=url)
    assert kept.out.startswith("pruned ")
    assert "past the store's retention (succeeded 7d, failed 7d)" in kept.out
    assert ok("status", str(job_id), "--json", store=url).json()["state"] == "cancelled"
    if url.startswith("rqlite"):
        return  # the shared cluster keeps other tests' finished jobs: no short retention there
    time.sleep(1.2)
    pruned = ok("prune", "--older-than", "1s", "--json", store=url).json()
    assert pruned == {"pruned": 1, "older_than_seconds": 1.0}
    one_error_line(taskq("status", str(job_id), store=url), 1, f"no job with id {job_id}")


# -- errors -------------------------------------------------------------------------------------


def test_an_argument_a_command_does_not_take_points_to_that_commands_help(url: str) -> None:
    ran = taskq(
        "schedule", "add", "nightly", "--every", "1d", f"{JOBS}:add", "--delay", "1m", store=url
    )
    one_error_line(ran, 2, "unrecognized arguments: --delay 1m (see 'taskq schedule add --help')")


def test_an_option_that_needs_another_is_refused_alone(url: str, queue: str) -> None:
    submit = ("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue)
    for alone, needs in (("--wait-timeout=5s", "--wait"), ("--run-anyway", "--after")):
        one_error_line(
            taskq(*submit, alone, store=url), 2, f"{alone.partition('=')[0]} goes with {needs}"
        )
    for alone in ("--timeout", "--wait-timeout"):
        one_error_line(
            taskq("result", "1", alone, "1s", store=url),
            2,
            "--timeout (--wait-timeout) goes with --wait",
        )


def test_bad_json_arguments_are_refused_and_nothing_is_written(url: str, queue: str) -> None:
    for bad in ("hello", "[1,", "{'a': 1}"):
        ran = taskq("submit", "--unchecked", f"{JOBS}:add", "1", bad, "--queue", queue, store=url)
        one_error_line(ran, 2, repr(bad), "is not JSON")
        assert ran.out == ""
    kwargs = taskq(
        "submit", "--unchecked", f"{JOBS}:add", "--kwargs", "[1]", "--queue", queue, store=url
    )
    one_error_line(kwargs, 2, "not a JSON object")
    target = taskq("submit", "not-a-target", "--queue", queue, store=url)
    one_error_line(target, 2, "package.module:function")
    memory = taskq(
        "submit", "--unchecked", f"{JOBS}:add", "--memory", "lots", "--queue", queue, store=url
    )
    one_error_line(memory, 2, "--memory")
    # Past what a worker could set, or a date could show: refused before anything is written.
    for option, value, named in (
        ("--memory", "99999999999TiB", "memory_bytes must be at most"),
        ("--cpu", str(2**63), "cpu_seconds must be at most"),
        ("--delay", "99999999999999d", "delay must be at most"),
    ):
        beyond = taskq(
            "submit", "--unchecked", f"{JOBS}:add", option, value, "--queue", queue, store=url
        )
        one_error_line(beyond, 2, named)
    assert ok("jobs", "--queue", queue, "--json", store=url).json() == []


def test_a_negative_duration_is_refused_as_such_however_it_is_written(url: str, queue: str) -> None:
    first = submit(url, queue, "add", "1", "1")
    for written in (["--delay", "-5m"], ["--delay=-5m"]):
        ran = taskq(
            "submit", "--unchecked", f"{JOBS}:add", "1", *written, "--queue", queue, store=url
        )
        one_error_line(ran, 2, "argument --delay: '-5m' is not a duration")
        assert ran.out == ""
    every = taskq("schedule", "add", queue, "--every", "-1.5h", f"{JOBS}:add", store=url)
    one_error_line(every, 2, "argument --every: '-1.5h' is not a duration")
    assert [job["id"] for job in ok("jobs", "--queue", queue, "--json", store=url).json()] == [
        first
    ]
    assert queue not in ok("schedule", "list", store=url).out


def test_an_unknown_job_id_is_an_error_that_says_where_the_ids_are(url: str, broker: Store) -> None:
    missing = str(NO_SUCH_JOB)
    # Whole: the line ends with the hint, as an unknown workflow id's does.
    unknown = f"taskq: error: no job with id {missing} (taskq jobs lists the newest)"
    for args in (
        ["status", missing],
        ["status", missing, "--json"],
        ["result", missing],
        ["result", missing, "--wait", "--timeout", "5s"],
        ["logs", missing],
        ["logs", "-f", missing],
        ["logs", missing, "--attempt", "1"],
        ["cancel", missing],
        ["retry", missing],
    ):
        assert one_error_line(taskq(*args, store=url), 1) == unknown, args


def test_logs_takes_the_number_of_any_attempt_a_job_may_have(url: str, queue: str) -> None:
    most = 2**31 - 1  # max_attempts' bound (taskq.broker.job_validation.MAX_ATTEMPTS)
    job_id = submit(url, queue, "add", "1", "2", "--max-attempts", str(most))
    for attempt in ("1001", str(most)):
        ran = taskq("logs", str(job_id), "--attempt", attempt, store=url)
        one_error_line(ran, 1, f"job {job_id} has no attempt {attempt}")
    beyond = taskq("logs", str(job_id), "--attempt", str(most + 1), store=url)
    one_error_line(beyond, 2, f"must be from 1 to {most}")


def test_the_store_comes_from_the_environment_or_after_the_command(url: str, queue: str) -> None:
    job_id = submit(url, queue, "add", "1", "1")
    from_env = taskq("jobs", "--queue", queue, "--json", env={"TASKQ_STORE": url})
    assert [job["id"] for job in from_env.json()] == [job_id]
    after = taskq("jobs", "--queue", queue, "--json", "--store", url)
    assert [job["id"] for job in after.json()] == [job_id]


@pytest.mark.parametrize(
    "args",
    [
        ["jobs"],
        ["submit", "--unchecked", f"{JOBS}:add", "1", "2"],
        ["status", "1"],
        ["cluster"],
        ["schedule", "list"],
    ],
)
def test_an_unreachable_store_is_named(args: list[str]) -> None:
    # One failover retry: the default budget is the next test's.
    ran = taskq(*args, store=f"{UNREACHABLE}?retries=1")
    assert ran.code == 1, ran
    assert "127.0.0.1:1" in ran.err
    assert ran.err.strip().splitlines()[-1].startswith("taskq: error: ")
    if args[0] in {"jobs", "status"}:
        assert "no read" in ran.err  # reading opens the store without writing


def _closed_ports(count: int) -> list[int]:
    """Ports nothing listens on: each was free a moment ago, and is closed again."""
    with ExitStack() as sockets:
        held = [sockets.enter_context(socket.create_server(("127.0.0.1", 0))) for _ in range(count)]
        return [sock.getsockname()[1] for sock in held]


def test_a_store_refusing_every_connection_is_given_up_on_after_one_round() -> None:
    # No node runs, so none is electing: the failover tries (about 12 s) are not
    # waited out (the unit tests count the calls; by hand this takes 0.4 s).
    first, second = _closed_ports(2)
    url = f"rqlite://127.0.0.1:{first},127.0.0.1:{second}"
    # A command that writes reads the store's schema versions first, as one that reads does.
    for args, failed in (
        (["jobs"], "answered no read"),
        (["submit", "--unchecked", f"{JOBS}:add"], "answered no read"),
    ):
        one_error_line(
            taskq(*args, store=url),
            1,
            f"rqlite cluster {url} {failed}: every node refused the connection "
            f"(http://127.0.0.1:{first}, http://127.0.0.1:{second}): ConnectionRefusedError",
        )


def test_a_bad_store_url_is_a_usage_error() -> None:
    one_error_line(taskq("jobs", store="postgres://x"), 2, "unknown scheme 'postgres'")
    one_error_line(taskq("jobs", store="rqlite://h:1?timout=3"), 2, "timout")


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` on every command and subcommand (in-process: argparse only)."""
    commands = [
        ["demo"], ["submit"], ["status"], ["result"], ["cancel"], ["retry"], ["logs"], ["jobs"],
        ["queues"], ["pause"], ["resume"], ["limit"], ["submit-limit"], ["workers"],
        ["cluster"], ["stats"], ["prune"], ["retention"], ["schedule"], ["schedule", "add"],
        ["schedule", "list"], ["schedule", "remove"], ["schedule", "pause"],
        ["schedule", "resume"], ["backup"], ["restore"],
    ]  # fmt: skip
    for command in commands:
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*command, "--help"])
        assert exited.value.code == 0
        shown = capsys.readouterr().out
        assert shown.startswith(f"usage: taskq {' '.join(command)}"), shown
        assert "--store" in shown
    ran = taskq("--help")
    assert ran.code == 0
    assert all(f"    {name} " in ran.out for name in ("demo", "submit", "schedule", "prune"))


def test_a_usage_error_is_one_line() -> None:
    ran = taskq("submit")
    one_error_line(ran, 2, "pkg.mod:func", "taskq submit --help")
    one_error_line(taskq("frobnicate"), 2, "no command 'frobnicate'")
