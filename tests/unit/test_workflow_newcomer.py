"""The slips a newcomer from Celery makes building a workflow, each refused in words that
say what was meant, before anything is written; inside a job, failing it for good.

No store but ``taskq.testing``'s throwaway one; the sandbox tests run real children.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import taskq
import taskq.testing
from taskq import errors
from taskq.broker.limits import Limits
from taskq.broker.records import JobSpec, JobState
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.outcome import Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from tests.support import newcomer_jobs
from tests.support.newcomer_jobs import train_on
from tests.support.workflow_jobs import add, fail, square, total

JOBS = "tests.support.newcomer_jobs"
PREPARER = JobPreparer(policy=Policy(modules=("tests.support",)))
LIMITS = Limits(memory_bytes=256 << 20, cpu_seconds=5, wall_seconds=20)
DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


@pytest.fixture
def client() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(modules=[JOBS], submitter="test") as opened:
        yield opened


def test_a_bare_step_that_wants_its_parent_s_result_as_an_argument_says_how_to_read_it() -> None:
    # Celery's chain passes the result before as the first argument; taskq never does.
    for before in (square.step(2), square.map([1, 2])):
        with pytest.raises(errors.InvalidJob) as refused:
            before.then(train_on)
        message = str(refused.value)
        assert "missing a required argument: 'data'" in message
        assert "not given their results as arguments" in message
        assert "taskq.current_job().parent_results()" in message
        assert message.endswith("its own arguments go in train_on.step(...))")
        assert refused.value.field == "args"


def test_then_of_a_submitted_job_says_it_is_waited_on_with_after(client: taskq.Client) -> None:
    handle = client.submit(square, 2)
    with pytest.raises(errors.InvalidJob) as refused:
        square.step(1).then(handle)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("a flow is made of steps (resize.step(...), resize.map(...)")
    assert f"job {handle.id} is already submitted" in message
    assert f"options(after=[{handle.id}])" in message
    assert "target" not in message  # the word of call_spec's refusal, which the user never wrote
    with pytest.raises(errors.InvalidJob, match=f"job {handle.id} is already submitted"):
        client.submit_workflow(handle)  # type: ignore[arg-type]
    assert [info.id for info in client.workflows()] == []  # nothing written


def several_steps() -> list[Any]:
    """Flows side by side as a Celery group takes them: one list, a generator."""
    return [[square.step(1), square.step(2)], (square.step(n) for n in range(2))]


def test_several_flows_given_as_one_value_are_pointed_to_group() -> None:
    told = r"taskq\.group\(\*flows\), each its own argument"
    for several in several_steps():
        with pytest.raises(errors.InvalidJob, match=told):
            add.step(1).then(several)
    for several in several_steps():
        with pytest.raises(errors.InvalidJob, match=told):
            taskq.group(several)


def test_a_value_that_is_no_flow_at_all_is_named_with_its_type() -> None:
    with pytest.raises(errors.InvalidJob, match=r"names, not 42 \(an int\)$"):
        add.step(1).then(42)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidJob, match=r"names, not None$"):
        taskq.group(add.step(1), None)  # type: ignore[arg-type]


class Described:
    """A declaration that is not a function: it only describes its job (``spec()``)."""

    def spec(self, *args: Any, **kwargs: Any) -> JobSpec:
        return square.spec(4)


def test_a_declaration_that_is_not_callable_still_goes_where_a_flow_goes() -> None:
    flow = add.step(1).then(Described())
    assert [job.payload["args"] for job in flow.submission().jobs] == [[1], [4]]


def test_a_map_over_one_string_is_refused_not_fanned_out_over_its_characters() -> None:
    with pytest.raises(errors.InvalidJob) as refused:
        square.map("/tmp/pics/1.png")
    assert str(refused.value) == (
        "square.map takes the items to fan out over, one job each: '/tmp/pics/1.png' (a str) "
        "is one item; one job is square.step(...), one job per item square.map([...])"
    )
    with pytest.raises(errors.InvalidJob, match=r"5 \(an int\) is not a collection of items"):
        square.map(5)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidJob, match=r"^add\.map takes"):
        add.map(b"ab")
    assert len(newcomer_jobs.prepare.map(["/tmp/pics/1.png"])) == 1


def test_one_step_after_itself_waits_on_itself_and_the_refusal_says_why() -> None:
    first = square.step(1)
    with pytest.raises(errors.InvalidJob) as refused:
        first.then(first)
    message = str(refused.value)
    assert "square(1) would wait on itself (a step is one job wherever a flow names it" in message
    assert "each other" not in message
    # A chain that names its first step again, meaning to run that call again.
    with pytest.raises(errors.InvalidJob, match=r"would wait on each other \(a step is one job"):
        first.then(total).then(first)


@pytest.mark.parametrize(
    ("kind", "told"),
    [
        ("list", r"not \[<Flow of 1 step\(s\): square\(1\)>, .* \(a list\): spawn several flows"),
        ("generator", r"\(a generator\): spawn several flows as one, spawn\(taskq\.group"),
        ("nothing", r"^spawn\(\) takes a flow .* or a declared job, not None$"),
        ("one_path", r"^square\.map takes the items .* '12' \(a str\) is one item"),
    ],
)
def test_a_spawn_of_what_is_not_a_flow_fails_the_job_for_good(
    client: taskq.Client, kind: str, told: str
) -> None:
    handle = client.submit(f"{JOBS}:spawn_not_a_flow", kind)
    taskq.testing.run_due(client, delayed=True)
    job = client.get(handle.id)
    assert (job.state, job.attempts) == (JobState.FAILED, 1)  # not retried: the same code again
    assert job.error is not None
    assert job.error["gave_up"] == "permanent"
    assert re.search(told, job.error["message"]), job.error["message"]
    assert [each.id for each in client.list()] == [handle.id]  # nothing spawned


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("isolation", [Sandbox, PoolSandbox])
async def test_a_worker_s_child_fails_a_spawn_of_a_list_for_good(isolation: type[Sandbox]) -> None:
    async with isolation(preparer=PREPARER) as sandbox:
        outcome = await sandbox.run(CallPayload(f"{JOBS}:spawn_not_a_flow", ["list"]), LIMITS)
    assert (outcome.status, outcome.give_up, outcome.spawn) == (Status.ERROR, "permanent", None)
    assert outcome.error is not None
    assert outcome.error["type"] == "TypeError"
    assert "spawn several flows as one, spawn(taskq.group(*flows))" in outcome.error["message"]


def test_a_job_after_a_workflow_s_jobs_joins_it_as_the_page_says(client: taskq.Client) -> None:
    first = client.submit_workflow(square.step(2), name="first")
    second = client.submit_workflow(square.step(3), name="second")
    taskq.testing.run_due(client)
    failing = fail.options(client=client, after=[first.job_ids[0]]).submit()
    looking = client.submit(f"{JOBS}:report", after=[failing], run_anyway=True)
    taskq.testing.run_due(client)
    assert client.get(looking.id).workflow_id == first.id
    assert client.workflow(first.id).status is taskq.WorkflowStatus.FAILED  # the joiner's end
    # What a run_anyway job reads of a parent that did not succeed.
    assert looking.result(timeout=0) == [["dead", ["message", "status", "traceback", "type"]]]
    with pytest.raises(errors.InvalidJob, match="different workflows"):
        client.submit(f"{JOBS}:report", after=[first.job_ids[0], second.job_ids[0]])
    alone = client.submit(square, 4)
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit(f"{JOBS}:report", after=[first.job_ids[0], alone])
    assert f"(job {first.job_ids[0]} in workflow {first.id}, job {alone.id} in none)" in str(
        refused.value
    )
    with pytest.raises(errors.InvalidJob) as refused:
        client.submit(f"{JOBS}:report", after=[alone, alone])
    assert f"after: job {alone.id} given more than once" in str(refused.value)


def celery_table() -> list[list[str]]:
    """The code in each row's taskq column of the page's "Coming from Celery" table."""
    section = DOC.read_text().partition("\n## Coming from Celery\n")[2].partition("\n## ")[0]
    rows = [line.split(" | ")[1] for line in section.splitlines() if line.startswith("| `")]
    return [re.findall(r"`([^`]+)`", row) for row in rows]


def test_the_celery_table_s_python_runs(client: taskq.Client) -> None:
    """Each piece of Python the table gives runs, in its order, against its jobs: a name
    alone (``JobHandle``) is only named, a command line (``taskq workflow cancel ID``)
    is not Python. Where it says ``parent_results()``, it means the current job's."""
    rows = celery_table()
    assert len(rows) == 9, rows
    here = {
        name: getattr(newcomer_jobs, name)
        for name in ("prepare", "train", "evaluate", "resize", "crop", "build_index", "report")
    }
    here |= {"taskq": taskq, "client": client, "url": "u", "out": "i", "a": "a", "b": "b"}
    here |= {"paths": ["p1", "p2"], "handle": client.submit(newcomer_jobs.prepare, "u")}
    here["flow"] = newcomer_jobs.prepare.step("u").then(newcomer_jobs.train)
    ran = []
    taskq.set_default_client(client)
    try:
        for code in (code for row in rows for code in row):
            if re.fullmatch(r"[\w.]+", code):
                continue
            try:
                compiled = compile(code, "docs/workflows.md", "exec")
            except SyntaxError:
                assert code.startswith("taskq "), code  # a command line
                continue
            if "current_job()" in code or "parent_results()" in code:
                with taskq.testing.as_job(parent_results=["before"]) as job:
                    here["parent_results"] = job.parent_results
                    exec(compiled, here)
            else:
                exec(compiled, here)
                taskq.testing.run_due(client)
            ran.append(code)
    finally:
        taskq.set_default_client(None)
    assert here["parent"].result == "before"
    assert here["pipeline"].result(timeout=0) == "trained on prepared u"
    assert len(ran) == 14, ran
