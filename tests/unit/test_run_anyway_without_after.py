"""``run_anyway=True`` given to a job submitted alone without ``after`` is refused.

It says how a job takes its parents' ends; alone, its parents are those of
``after``, so without them the option would be dropped unsaid, as
``taskq submit --run-anyway`` without ``--after`` is refused. A workflow's
step takes it without ``after`` (its parents are the flow's), and a job
declared ``run_anyway`` is submitted alone as declared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import square, total

SQUARE = "tests.support.workflow_jobs:square"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[taskq.Client]:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as opened:
        yield opened


def _refused(client: taskq.Client, submit: Callable[[], Any]) -> str:
    with pytest.raises(errors.InvalidJob) as refused:
        submit()
    assert refused.value.field == "run_anyway"
    assert client.list() == []  # nothing written
    return str(refused.value)


@pytest.mark.parametrize(
    "submit",
    [
        lambda c: c.submit(SQUARE, 3, run_anyway=True),
        lambda c: c.submit(SQUARE, 3, run_anyway=True, unchecked=True),
        lambda c: c.submit(SQUARE, 3, run_anyway=True, after=[]),
        lambda c: c.submit(square.options(run_anyway=True), 3),
        lambda c: square.options(run_anyway=True, client=c).submit(3),
        lambda c: square.options(run_anyway=True, client=c).submit_many([(3,), (4,)]),
        lambda c: c.submit_many(square.options(run_anyway=True), [(3,)]),
        lambda c: c.submit_many([taskq.NamedCall(SQUARE, (3,), {"run_anyway": True})]),
        lambda c: c.submit_shell("true", run_anyway=True),
        lambda c: c.submit_python("def f(): pass", "f", run_anyway=True),
    ],
    ids=[
        "by name",
        "by name unchecked",
        "after empty",
        "options through client",
        "options submit",
        "options submit_many",
        "submit_many of options",
        "named call",
        "shell",
        "python",
    ],
)
def test_a_job_alone_given_run_anyway_without_after_is_refused(
    client: taskq.Client, submit: Callable[[taskq.Client], Any]
) -> None:
    message = _refused(client, lambda: submit(client))
    assert "run_anyway=True goes with after=[...]" in message
    assert "\n" not in message


def test_the_async_client_refuses_it_too(client: taskq.Client, tmp_path: Path) -> None:
    async def submit() -> None:
        async with taskq.AsyncClient(f"sqlite://{tmp_path / 'taskq.db'}") as aclient:
            await aclient.submit(SQUARE, 3, run_anyway=True)

    _refused(client, lambda: anyio.run(submit))


def test_with_after_it_is_taken(client: taskq.Client) -> None:
    first = client.submit(SQUARE, 2)
    by_name = client.submit(SQUARE, 3, after=[first], run_anyway=True)
    declared = square.options(run_anyway=True, client=client).options(after=[first]).submit(4)
    assert [client.get(job).run_anyway for job in (by_name, declared)] == [True, True]


def test_a_job_declared_run_anyway_is_submitted_alone_as_declared(client: taskq.Client) -> None:
    report = taskq.job(queue="flows", run_anyway=True)(square.function)
    handle = client.submit(report, 5)
    assert client.get(handle).state is taskq.JobState.QUEUED


def test_a_step_of_a_workflow_takes_it_without_after(client: taskq.Client) -> None:
    flow = square.step(2).then(total.options(run_anyway=True))
    pipeline = client.submit_workflow(flow)
    assert [job.run_anyway for job in map(client.get, pipeline.job_ids)] == [False, True]


def test_a_schedules_call_by_name_with_run_anyway_and_no_after_is_refused(
    client: taskq.Client,
) -> None:
    # Each tick submits the job alone, as the server refuses for a schedule's job.
    call = taskq.NamedCall(SQUARE, (3,), {"run_anyway": True})
    with pytest.raises(errors.InvalidJob) as refused:
        client.add_schedule("squares", call, every_seconds=60, unchecked=True)
    assert refused.value.field == "run_anyway"
    assert client.schedules() == []
