"""``taskq workflow list|show|wait|cancel|retry``, ``jobs --workflow``, ``status`` and
``submit --after``, run as the real command against both stores, with a real
``taskq-worker`` where jobs must run.

Each test works in a queue of its own name (the rqlite cluster is shared) and
waits on outcomes with bounded timeouts.
"""

from __future__ import annotations

import uuid

import pytest

import taskq
from taskq.broker.records import JobState
from taskq.broker.stores.store import Store
from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.worker_process import WorkerFleet
from tests.support.workflow_jobs import add, fail, square, total

pytestmark = pytest.mark.timeout(240)

JOBS = "tests.support.jobs"
WAIT = 120
NO_SUCH_WORKFLOW = "987654321"


@pytest.fixture
def url(store: Store) -> str:
    """The URL of a store of each kind (tests/conftest.py), which the commands open."""
    return store.url


@pytest.fixture
def client(store: Store) -> taskq.Client:
    return taskq.Client(store=store, submitter="acceptance")


@pytest.fixture
def queue() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _diamond(client: taskq.Client, queue: str) -> taskq.WorkflowHandle:
    """square(3) first; add(1, 2) and square(4) after it; total() after both."""
    first = square.options(queue=queue).step(3)
    flow = taskq.group(
        first.then(add.options(queue=queue).step(1, 2)),
        first.then(square.options(queue=queue).step(4)),
    ).then(total.options(queue=queue))
    return client.submit_workflow(flow, name="diamond")


def test_a_diamond_is_drawn_once_per_job_then_its_ends_are_shown(
    url: str, queue: str, client: taskq.Client, workers: WorkerFleet
) -> None:
    pipeline = _diamond(client, queue)
    first, left, right, fan_in = pipeline.job_ids
    shown = ok("workflow", "show", str(pipeline.id), store=url).out.splitlines()
    assert shown[0].startswith(f"workflow {pipeline.id} 'diamond' (running), by acceptance")
    call = "tests.support.workflow_jobs"
    assert shown[1:] == [
        f"{first} queued  {call}:square(3)",
        f"├─ {left} waiting  {call}:add(1, 2)",
        f"│  └─ {fan_in} waiting  {call}:total()",
        f"└─ {right} waiting  {call}:square(4)",
        f"   └─ {fan_in} (see above)",
        "4 jobs: 1 queued, 3 waiting",
    ]
    as_json = ok("workflow", "show", str(pipeline.id), "--json", store=url).json()
    assert as_json["workflow"]["name"] == "diamond"
    assert as_json["workflow"]["counts"]["waiting"] == 3
    assert [job["id"] for job in as_json["jobs"]] == list(pipeline.job_ids)
    assert {(edge["parent_id"], edge["child_id"]) for edge in as_json["edges"]} == {
        (first, left),
        (first, right),
        (left, fan_in),
        (right, fan_in),
    }
    listed = ok("jobs", "--workflow", str(pipeline.id), "--json", store=url).json()
    assert [job["id"] for job in listed] == sorted(pipeline.job_ids, reverse=True)
    status = ok("status", str(fan_in), store=url).out
    assert f"workflow   {pipeline.id} 'diamond' (running)" in status
    assert f"parents    {left} waiting, {right} waiting; waits for 2 of them to end" in status
    assert f"children   {left} waiting, {right} waiting" in ok("status", str(first), store=url).out

    workers.start(url, worker={"queues": [queue], "concurrency": 2})
    assert pipeline.result(timeout=WAIT) == {
        "sum": 3 + 16,
        "count": 2,
        "in_order": True,
        "parent_count": 2,
    }
    waited = ok("workflow", "wait", str(pipeline.id), "--timeout", str(WAIT), store=url)
    assert waited.out == f"workflow {pipeline.id} 'diamond' succeeded (4 jobs: 4 succeeded)\n"
    shown = ok("workflow", "show", str(pipeline.id), store=url).out.splitlines()
    assert shown[-1] == "4 jobs: 4 succeeded"
    assert shown[0].startswith(f"workflow {pipeline.id} 'diamond' (succeeded), by")
    assert shown[3] == f"│  └─ {fan_in} succeeded  {call}:total()"


def test_show_marks_a_step_that_runs_anyway_under_a_parent_that_did_not_succeed(
    url: str, queue: str, client: taskq.Client
) -> None:
    flow = (
        square.options(queue=queue).step(2).then(add.options(queue=queue, run_anyway=True).step(1))
    )
    pipeline = client.submit_workflow(flow)
    first, anyway = pipeline.job_ids
    # No worker takes the queue: the cancel ends the parent, and the step is queued all the same.
    ok("cancel", str(first), store=url)
    shown = ok("workflow", "show", str(pipeline.id), store=url).out.splitlines()
    call = "tests.support.workflow_jobs"
    assert shown[1:3] == [
        f"{first} cancelled  {call}:square(2)  (cancelled by request while queued)",
        f"└─ {anyway} queued (runs anyway)  {call}:add(1)",
    ]
    jobs = ok("workflow", "show", str(pipeline.id), "--json", store=url).json()["jobs"]
    assert [job["run_anyway"] for job in jobs] == [False, True]


def test_submit_after_waits_for_its_parents_then_runs(
    url: str, queue: str, workers: WorkerFleet
) -> None:
    def submit(*args: str) -> int:
        return int(ok("submit", "--unchecked", *args, "--queue", queue, store=url).out)

    first = submit(f"{JOBS}:add", "1", "2")
    second = submit(f"{JOBS}:add", "3", "4")
    child = submit(f"{JOBS}:add", "5", "6", "--after", f"{first},{second}")
    dead = submit("tests.support.workflow_jobs:fail", "--max-attempts", "1")
    skipped = submit(f"{JOBS}:add", "7", "8", "--after", str(dead))
    anyway = submit(f"{JOBS}:add", "9", "10", "--after", str(dead), "--run-anyway")
    for waiting in (child, skipped, anyway):
        assert ok("status", str(waiting), "--json", store=url).json()["state"] == "waiting"
    assert "parents    " in ok("status", str(child), store=url).out

    workers.start(url, worker={"queues": [queue], "concurrency": 2})
    assert ok("result", str(child), "--wait", "--timeout", str(WAIT), store=url).out == "11\n"
    assert ok("result", str(anyway), "--wait", "--timeout", str(WAIT), store=url).out == "19\n"
    cancelled = taskq_command("result", str(skipped), "--wait", "--timeout", str(WAIT), store=url)
    assert cancelled.code == 1, cancelled
    jobs = {job["id"]: job for job in ok("jobs", "--queue", queue, "--json", store=url).json()}
    assert jobs[skipped]["state"] == "cancelled"
    assert str(dead) in jobs[skipped]["error"]["message"]
    # Each child's one attempt was claimed after every parent's end was written.
    for child_id, parents in ((child, (first, second)), (anyway, (dead,))):
        claimed = jobs[child_id]["claimed_at"]
        assert all(jobs[parent]["finished_at"] <= claimed for parent in parents)


def test_cancel_and_retry_a_whole_workflow_say_how_many_jobs_moved(
    url: str, queue: str, client: taskq.Client, workers: WorkerFleet
) -> None:
    failing = client.submit_workflow(
        square.options(queue=queue)
        .map([1, 2])
        .then(fail.options(queue=queue))
        .then(add.options(queue=queue).step(1)),
        name="fails",
    )
    workers.start(url, worker={"queues": [queue]})
    # A script's wait: it ends once nothing is left to run, and exits 1 as the pipeline failed.
    waited = taskq_command("workflow", "wait", str(failing.id), "--timeout", str(WAIT), store=url)
    assert (waited.code, waited.out) == (
        1,
        f"workflow {failing.id} 'fails' failed (4 jobs: 2 succeeded, 1 dead, 1 cancelled)\n",
    )
    info = client.wait_workflow(failing.id, timeout=WAIT)
    assert (info.counts[JobState.DEAD], info.counts[JobState.CANCELLED]) == (1, 1)
    shown = ok("workflow", "show", str(failing.id), store=url).out
    assert f"{failing.job_ids[2]} dead" in shown
    assert shown.startswith(f"workflow {failing.id} 'fails' (failed), by")
    assert "ValueError: on purpose" in shown
    retried = ok("workflow", "retry", str(failing.id), store=url).out
    # The dead job retried, and the job its end had cancelled brought back.
    assert retried.startswith(f"workflow {failing.id}: 2 jobs retried or brought back")
    again = taskq_command("workflow", "retry", str(failing.id), "--json", store=url)
    # A job may have failed again by now; none moved is exit 1 (see below).
    assert again.code == (0 if again.json()["retried"] else 1), again
    assert again.json()["workflow_id"] == failing.id

    idle = f"{queue}-idle"  # no worker takes it: its jobs stay queued and waiting
    parked = client.submit_workflow(
        square.options(queue=idle).map([1, 2, 3]).then(total.options(queue=idle))
    )
    late = taskq_command("workflow", "wait", str(parked.id), "--timeout", "200ms", store=url)
    one_error_line(
        late,
        1,
        f"workflow {parked.id} still has 4 job(s) to end",
        f"no active worker serves queue {idle!r} (start one: taskq-worker --queues {idle}",
    )
    # The spelling submit --wait takes.
    spelt = taskq_command("workflow", "wait", str(parked.id), "--wait-timeout", "0.1", store=url)
    one_error_line(spelt, 1, f"workflow {parked.id} still has 4 job(s) to end after 0.1 s")
    # Nothing to retry yet: exit 1, as taskq retry of a queued job, with the line that says why.
    unmoved = taskq_command("workflow", "retry", str(parked.id), store=url)
    assert (unmoved.code, unmoved.out) == (
        1,
        f"workflow {parked.id}: nothing to retry; no job of it failed, died or was cancelled\n",
    )
    cancelled = ok("workflow", "cancel", str(parked.id), store=url).out
    assert cancelled.startswith(f"workflow {parked.id}: 4 jobs cancelled")
    # Cancelled again, every job has ended: exit 1, as taskq cancel of an ended job.
    twice = taskq_command("workflow", "cancel", str(parked.id), store=url)
    assert (twice.code, twice.out) == (
        1,
        f"workflow {parked.id}: nothing to cancel; every job of it has ended\n",
    )
    twice_json = taskq_command("workflow", "cancel", str(parked.id), "--json", store=url)
    assert twice_json.code == 1, twice_json
    assert twice_json.json() == {"workflow_id": parked.id, "cancelled": 0}
    states = {job.state for job in client.list(taskq.JobQuery(workflow_id=parked.id))}
    assert states == {JobState.CANCELLED}


def test_list_shows_the_newest_workflows_with_their_jobs_counted_and_pages_on(
    url: str, queue: str, client: taskq.Client
) -> None:
    # No worker takes this queue: its jobs stay queued and waiting. A name of this
    # test's own keeps other tests' workflows (the rqlite cluster is shared) out.
    name = f"nightly-{queue}"
    older = client.submit_workflow(
        square.options(queue=queue).map([1, 2]).then(total.options(queue=queue)), name=name
    )
    newer = client.submit_workflow(square.options(queue=queue).step(3), name=name)
    client.cancel_workflow(newer.id)
    listed = ok("workflow", "list", "--name", name, store=url)
    lines = listed.out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "SUBMITTER",
        "SUBMITTED",
        "STATUS",
        "JOBS",
        "STATES",
    ]
    assert [line.split()[:2] for line in lines[1:]] == [
        [str(newer.id), name],
        [str(older.id), name],
    ]
    # Its status, its jobs, then how many are in each state.
    assert " ".join(lines[1].split()[-4:]) == "cancelled 1 1 cancelled"
    assert " ".join(lines[2].split()[-6:]) == "running 3 2 queued, 1 waiting"
    assert listed.err == ""
    running = ok("workflow", "list", "--name", name, "--status", "running", store=url)
    assert [line.split()[0] for line in running.out.splitlines()[1:]] == [str(older.id)]
    failed = ok("workflow", "list", "--name", name, "--status", "failed", store=url)
    assert failed.out == "no workflows\n"
    bad = taskq_command("workflow", "list", "--status", "done", store=url)
    one_error_line(bad, 2, "--status")
    first = ok("workflow", "list", "--name", name, "--limit", "1", store=url)
    assert [line.split()[0] for line in first.out.splitlines()[1:]] == [str(newer.id)]
    assert first.err == f"(more: add --before {newer.id})\n"
    rest = ok("workflow", "list", "--name", name, "--before", str(newer.id), "--json", store=url)
    [shown] = rest.json()
    assert (shown["id"], shown["submitter"]) == (older.id, "acceptance")
    assert (shown["counts"]["queued"], shown["counts"]["waiting"]) == (2, 1)
    assert shown["status"] == "running"
    assert ok("workflow", "list", "--name", f"{name}-none", store=url).out == "no workflows\n"
    one_error_line(taskq_command("workflow", "list", "--limit", "0", store=url), 2, "--limit")
    one_error_line(taskq_command("workflow", "list", "--before", "x", store=url), 2, "'x'")


def test_a_wide_fan_out_is_drawn_in_a_screen_unless_all_is_asked_for(
    url: str, queue: str, client: taskq.Client
) -> None:
    width = 23
    pipeline = client.submit_workflow(
        square.options(queue=queue).map(range(width)).then(total.options(queue=queue))
    )
    *parts, fan_in = pipeline.job_ids
    shown = ok("workflow", "show", str(pipeline.id), store=url).out.splitlines()
    # Twenty roots, the fan-in under the first, references under the rest, then one line.
    assert len(shown) == 1 + 20 * 2 + 1 + 1
    assert shown[2] == f"└─ {fan_in} waiting  tests.support.workflow_jobs:total()"
    assert shown[-2] == "... 3 more: 3 queued"
    assert (
        shown[-1]
        == f"{width + 1} jobs: {width} queued, 1 waiting (3 not drawn: --all draws every job)"
    )
    every = ok("workflow", "show", str(pipeline.id), "--all", store=url).out.splitlines()
    assert [line.split()[0] for line in every[1:-1:2]] == [str(part) for part in parts]
    assert every[-1] == f"{width + 1} jobs: {width} queued, 1 waiting"


def test_an_unknown_workflow_or_parent_is_one_error_line_and_changes_nothing(
    url: str, queue: str
) -> None:
    forms = [("workflow", action) for action in ("show", "wait", "cancel", "retry")]
    # Its jobs listed, an unknown workflow is refused too, not shown as one with none.
    forms += [("jobs", "--workflow"), ("jobs", "--json", "--workflow")]
    for words in forms:
        ran = taskq_command(*words, NO_SUCH_WORKFLOW, store=url)
        # Where the known ones are, for a mistyped id.
        one_error_line(
            ran,
            1,
            f"no workflow with id {NO_SUCH_WORKFLOW} (taskq workflow list shows the newest)",
        )
    bad_timeout = taskq_command("workflow", "wait", "1", "--timeout", "5x", store=url)
    one_error_line(bad_timeout, 2, "'5x'")
    one_error_line(taskq_command("workflow", "show", "abc", store=url), 2, "'abc'")
    one_error_line(taskq_command("workflow", "show", "0", store=url), 2, "workflow id")
    one_error_line(taskq_command("jobs", "--workflow", "x", store=url), 2, "workflow id")
    submit = ("submit", "--unchecked", f"{JOBS}:add", "1", "2", "--queue", queue, "--after")
    # No job has that id: a runtime error (exit 1), as a missing job is for every command;
    # a job named twice is the command line's mistake, a usage error (exit 2).
    for after, code, said in (
        ("987654321", 1, "no job has the id(s) [987654321] given as parents"),
        ("5,5", 2, "--after: job 5 given more than once"),
    ):
        one_error_line(taskq_command(*submit, after, store=url), code, said)
    assert ok("jobs", "--queue", queue, store=url).out == "no jobs\n"
