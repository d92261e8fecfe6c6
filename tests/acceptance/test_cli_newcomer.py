"""What the ``taskq`` command says where a newcomer first met it saying too little or
the wrong thing: a retry's outcome per job and the jobs it brought back, a workflow
retry's count, a --json-job submit to a store not there yet, a mistyped flag or job
id, the logs of a job that never ran, an earlier attempt's limit, an attempt whose lease
ran out, a schedule past its run with no worker, the workflow actions in the help, taskq
alone, the live workers of each queue, a wait on a queue no worker serves.

Each test runs the real command, against a SQLite file of its own (the retries, the
logs and the queues on the rqlite tier's cluster too); a worker process only where a
wait is to end, as a cancel ends jobs as a failure would for a retry, the test claims
and fails the attempts it tells, and a worker that serves a queue stands as its
registration.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.maintenance import job_requeue_expired
from taskq.broker.ops.schedules import schedule_add
from taskq.dev.processes import wait_until
from tests.support import reports
from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.registered_workers import register
from tests.support.worker_process import REPO, WorkerFleet
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


@pytest.mark.both_stores
def test_logs_of_a_job_that_ended_before_it_ran_say_so_and_why_in_both_forms(
    store_url: str,
) -> None:
    parent = _submit(store_url, f"{JOBS}:add", "1", "2")
    child = _submit(store_url, f"{JOBS}:add", "3", "4", "--after", str(parent))
    waiting = _submit(store_url, f"{JOBS}:add", "5", "6", "--delay", "1h")
    # The parent's cancel cancels the child: neither will run unless retried.
    ok("cancel", str(parent), store=store_url)
    said = f"job {child} ended cancelled before it ran: ParentFailed: parent job {parent} ended"
    plain = ok("logs", str(child), store=store_url)
    assert plain.out == f"{said} cancelled\n"
    # Followed, the same line (a note: stderr) and the same exit, not the job's end as a failure.
    followed = ok("logs", "-f", str(child), store=store_url)
    assert (followed.out, followed.err) == ("", f"{said} cancelled\n")
    # Cancelled by hand, it says so, once.
    assert ok("logs", str(parent), store=store_url).out == (
        f"job {parent} ended cancelled before it ran: cancelled by request while queued\n"
    )
    assert ok("logs", str(waiting), store=store_url).out == (
        f"job {waiting} is queued and has no attempts yet\n"
    )


@pytest.mark.both_stores
def test_logs_tell_an_attempts_limit_only_where_the_store_knows_it(store_url: str) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"  # claimed here: no other test's jobs in it
    job = int(
        ok(
            *("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue),
            *("--max-attempts", "1"),
            store=store_url,
        ).out
    )
    store = open_store(store_url, migrate=False)

    def fail_once() -> None:
        [claimed] = plan.run(store, job_claim("newcomer-probe", [queue], limit=1, lease_seconds=60))
        error = {"type": "ValueError", "message": f"attempt {claimed.attempt}"}
        plan.run(store, reports.report_one(reports.failed(claimed.lease, error)))

    def headings() -> list[str]:
        logs = ok("logs", str(job), store=store_url).out.splitlines()
        return [line.split("  ")[0] for line in logs if line.startswith("attempt ")]

    try:
        fail_once()
        assert headings() == ["attempt 1 of 1"]
        # Each retry raises the limit to one past the attempts made: attempt 1 ran under 1,
        # which the store does not keep, so its limit is not told as the new one.
        ok("retry", str(job), store=store_url)
        assert headings() == ["attempt 1"]
        fail_once()
        ok("retry", str(job), store=store_url)
        fail_once()
    finally:
        store.close()
    assert headings() == ["attempt 1", "attempt 2", "attempt 3 of 3"]
    assert ok("status", str(job), "--json", store=store_url).json()["state"] == "dead"


def test_logs_of_an_attempt_whose_lease_ran_out_do_not_call_the_lease_its_run(
    store_url: str,
) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"  # claimed here: no other test's jobs in it
    submit = ("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue)
    job = int(ok(*submit, store=store_url).out)
    store = open_store(store_url, migrate=False)
    try:
        began = time.time()
        claim = job_claim("newcomer-silent", [queue], limit=1, lease_seconds=30, now=began)
        [claimed] = plan.run(store, claim)
        # The worker goes silent; maintenance finds the lease run out 31 s after the claim.
        plan.run(store, job_requeue_expired(now=began + 31))
    finally:
        store.close()
    logs = ok("logs", str(job), store=store_url).out
    assert f"attempt {claimed.attempt} of 3  lease_expired" in logs
    assert "no report: its lease ran out 31" in logs
    assert "took" not in logs


def test_schedule_list_says_a_past_run_waits_for_a_live_worker(store_url: str) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    spec = taskq.call_spec(f"{JOBS}:add", [1, 2], queue=queue)
    store = open_store(store_url)  # a new store: made as a command's first write makes it
    try:
        # Added a minute ago, every 10 s: its next run passed with nobody to fire it.
        added_at = time.time() - 60
        plan.run(store, schedule_add("tick", spec, every_seconds=10, now=added_at))
        listed = ok("schedule", "list", store=store_url)
        assert "tick" in listed.out
        assert listed.err == (
            "note: tick is past its next run: no live worker fires schedules "
            "(start one: taskq-worker)\n"
        )
        register(store, "newcomer-worker", queue, None)
        assert ok("schedule", "list", store=store_url).err == ""
    finally:
        store.close()


@pytest.mark.parametrize(
    "words",
    [
        ("status", "abc"),
        ("result", "--wait", "abc"),
        ("cancel", "1", "abc"),
        ("retry", "abc"),
        ("jobs", "--before", "abc"),
        ("logs", "abc"),
    ],
)
def test_a_mistyped_job_id_is_refused_saying_what_an_id_is_as_a_workflow_id_is(
    tmp_path: Path, words: tuple[str, ...]
) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    one_error_line(taskq_command(*words, store=url), 2, "'abc' is not a job id (a whole number)")
    said = one_error_line(taskq_command(*words[:-1], "0", store=url), 2, "'0' is not a job id")
    assert "from 1 to" in said
    # Refused before a store is asked, as a workflow id is: none was made.
    assert not (tmp_path / "taskq.db").exists()


def test_the_workflow_actions_are_all_named_in_one_order_in_every_help() -> None:
    own = taskq_command("workflow", "--help").out
    examples = re.findall(r"taskq workflow (\w+)", own)
    assert examples == ["list", "show", "wait", "cancel", "retry"]
    listed = re.findall(r"^    (\w+) ", own, flags=re.MULTILINE)
    assert listed == examples
    # The line of ``taskq --help`` names each in that order too ("list them", "show one's").
    top = taskq_command("--help").out
    line = " ".join(top.split("\n    workflow ", 1)[1].split("\n\n", 1)[0].split())
    named = re.findall(r"\b(list|show|wait|cancel|retry)\b", line)
    assert named == examples, line


@pytest.mark.parametrize("words", [(), ("--store", "sqlite:///nowhere.db")])
def test_taskq_with_no_command_prints_its_help_on_stderr(words: tuple[str, ...]) -> None:
    ran = taskq_command(*words)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == taskq_command("--help").out


@pytest.mark.both_stores
def test_queues_counts_the_live_workers_of_each_queue_and_shouts_where_none_is(
    store_url: str,
) -> None:
    served, unserved, idle = (f"newcomer-{uuid.uuid4().hex[:8]}" for _ in range(3))
    submitted = {
        queue: ok("submit", "--unchecked", f"{JOBS}:echo", "1", "--queue", queue, store=store_url)
        for queue in (served, unserved, idle)
    }
    ok("cancel", submitted[idle].out.strip(), store=store_url)  # none queued: no one waits
    store = open_store(store_url, migrate=False)
    try:
        for worker in ("a", "b"):  # registered, with no process behind them
            register(store, f"{served}-{worker}", served, None)
    finally:
        store.close()

    rows = ok("queues", store=store_url).out.splitlines()
    # WORKERS is the last column, after eleven of one word each.
    workers = {
        queue: next(row for row in rows if row.startswith(f"{queue} ")).split(maxsplit=11)[-1]
        for queue in (served, unserved, idle)
    }
    assert workers == {served: "2", unserved: "NONE LIVE", idle: "0"}
    listed = {entry["queue"]: entry for entry in ok("queues", "--json", store=store_url).json()}
    assert [(listed[q]["workers"], listed[q]["unserved"]) for q in (served, unserved, idle)] == [
        (2, False),
        (0, True),
        (0, False),
    ]


@pytest.mark.both_stores
def test_a_job_open_again_shows_no_earlier_error_as_its_own_in_show_or_status(
    store_url: str,
) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"  # claimed here: no other test's jobs in it
    flow = square.options(queue=queue).step(3).then(add.options(queue=queue).step(1))
    with taskq.Client(store_url, submitter="newcomer") as client:
        pipeline = client.submit_workflow(flow)
    first, second = pipeline.job_ids

    def said() -> list[str]:
        """What workflow show, then status of each job, print."""
        shown = [("workflow", "show", str(pipeline.id))] + [
            ("status", str(job)) for job in (first, second)
        ]
        return [ok(*words, store=store_url).out for words in shown]

    ok("workflow", "cancel", str(pipeline.id), store=store_url)
    show, status, _ = said()
    assert _drawn(show, first).endswith("square(3)  (cancelled by request while queued)")
    assert _fields(status)["error"] == "Cancelled: cancelled by request while queued"
    ok("workflow", "retry", str(pipeline.id), store=store_url)
    # Queued and waiting again: a cancel's error is no attempt's, and no longer theirs.
    show, *statuses = said()
    assert "cancelled by request" not in show, show
    assert [_fields(status).get("error") for status in statuses] == [None, None]
    assert "cancelled by request" not in "".join(statuses)
    store = open_store(store_url, migrate=False)
    try:
        [claimed] = plan.run(store, job_claim("newcomer-probe", [queue], limit=1, lease_seconds=60))
        error = {"type": "ValueError", "message": "bad input"}
        plan.run(store, reports.report_one(reports.failed(claimed.lease, error)))
    finally:
        store.close()
    # Queued again after a failed attempt: its error is said as that attempt's.
    show, status, _ = said()
    assert _drawn(show, first) == (
        f"{first} queued  tests.support.workflow_jobs:square(3)  "
        "(last attempt: ValueError: bad input)"
    )
    fields = _fields(status)
    assert (fields["last attempt"], fields.get("error")) == ("ValueError: bad input", None)
    # The store keeps it as it was: the record's error is the attempt's.
    assert ok("status", str(first), "--json", store=store_url).json()["error"] == error


def _drawn(show: str, job: int) -> str:
    """The line of ``job`` in what ``taskq workflow show`` printed, without its tree's lines."""
    [line] = [line for line in show.splitlines() if re.match(rf"[│├└─ ]*{job} ", line)]
    return line.lstrip("│├└─ ")


def _fields(status: str) -> dict[str, str]:
    """The lines of what ``taskq status`` printed, by their names."""
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in status.splitlines() if line)


def _unserved_note(job: str, queue: str) -> str:
    return (
        f"taskq: job {job} is still queued: no active worker serves queue {queue!r} "
        f"(start one: taskq-worker --queues {queue} --modules {JOBS})"
    )


def test_a_submit_wait_says_once_a_few_seconds_in_that_no_worker_serves_the_queue(
    store_url: str,
) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    ran = taskq_command(
        *("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue),
        *("--wait", "--wait-timeout", "6s"),
        store=store_url,
    )
    job = str(ok("jobs", "--queue", queue, "--json", store=store_url).json()[0]["id"])
    # The note, then the timeout's error, which counts from the wait's start.
    note, error = ran.err.splitlines()
    assert note == _unserved_note(job, queue)
    assert error.startswith(f"taskq: error: job {job} is still queued after 6 s: no active")
    assert (ran.code, ran.out) == (1, "")


def test_a_workflow_wait_says_once_a_few_seconds_in_that_no_worker_serves_a_queue_of_it(
    store_url: str,
) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    flow = square.options(queue=queue).step(3).then(add.options(queue=queue).step(1))
    with taskq.Client(store_url, submitter="newcomer") as client:
        pipeline = client.submit_workflow(flow)
    ran = taskq_command("workflow", "wait", str(pipeline.id), "--timeout", "6s", store=store_url)
    # The note, as submit --wait says it, of the workflow's job still queued; then the
    # timeout's error, which counts from the wait's start.
    note, error = ran.err.splitlines()
    assert note == (
        f"taskq: job {pipeline.job_ids[0]} of workflow {pipeline.id} is still queued: no active "
        f"worker serves queue {queue!r} (start one: taskq-worker --queues {queue} --modules "
        "tests.support.workflow_jobs)"
    )
    assert error.startswith(f"taskq: error: workflow {pipeline.id} still has 2 job(s) to end")
    assert (ran.code, ran.out) == (1, "")


def test_a_wait_on_a_queue_a_worker_serves_says_nothing_of_workers(store_url: str) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    job = ok("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, store=store_url)
    store = open_store(store_url, migrate=False)
    try:
        register(store, f"{queue}-worker", queue, None)  # serves it, though it runs nothing
    finally:
        store.close()
    ran = taskq_command("result", job.out.strip(), "--wait", "--timeout", "5s", store=store_url)
    said = one_error_line(ran, 1, f"job {job.out.strip()} is still queued after 5 s")
    assert "worker" not in said


def test_a_result_wait_says_no_worker_serves_the_queue_and_waits_on_for_one(
    store_url: str, workers: WorkerFleet, tmp_path: Path
) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    job = ok("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, store=store_url)
    job_id = job.out.strip()
    said = tmp_path / "stderr"
    # No timeout: as a newcomer waits, for as long as it takes.
    argv = [sys.executable, "-m", "taskq.cli", "--store", store_url, "result", job_id, "--wait"]
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    with said.open("w") as err:
        waiter = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO, env=clean
        )
    try:
        note = _unserved_note(job_id, queue) + "\n"
        assert wait_until(lambda: said.read_text() == note, timeout=60), said.read_text()
        workers.start(store_url, worker={"queues": [queue]})
        out, _ = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert (waiter.returncode, out, said.read_text()) == (0, "3\n", note)


def test_status_of_a_queued_job_says_why_it_has_not_started(store_url: str) -> None:
    queue = f"newcomer-{uuid.uuid4().hex[:8]}"
    job = ok("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, store=store_url)
    job_id = job.out.strip()
    unserved = _fields(ok("status", job_id, store=store_url).out)["note"]
    assert unserved == _unserved_note(job_id, queue).partition("is still queued: ")[2]
    assert "no active worker" not in ok("status", job_id, "--json", store=store_url).out
    store = open_store(store_url, migrate=False)
    try:
        register(store, f"{queue}-worker", queue, None)  # serves it, though it runs nothing
    finally:
        store.close()
    assert "note" not in _fields(ok("status", job_id, store=store_url).out)
    ok("pause", queue, store=store_url)
    paused = _fields(ok("status", job_id, store=store_url).out)["note"]
    assert paused == f"queue {queue!r} is paused (taskq resume {queue} lets its jobs start)"
