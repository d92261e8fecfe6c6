"""Building workflows: each shape becomes the positions of a WorkflowSubmission; no store."""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.broker.records import WorkflowSubmission
from tests.support.workflow_jobs import add, fail, square, total

SQUARE = "tests.support.workflow_jobs:square"


def shape(submission: WorkflowSubmission) -> list[tuple[str, list[object], tuple[int, ...]]]:
    """Each job as (function, args, parent positions)."""
    return [
        (job.payload["target"].rpartition(":")[2], job.payload["args"], parents)
        for job, parents in zip(submission.jobs, submission.parents, strict=True)
    ]


def test_a_map_then_a_step_is_a_fan_in_over_every_member_in_order() -> None:
    flow = square.map([1, 2, 3]).then(total)
    assert shape(flow.submission()) == [
        ("square", [1], ()),
        ("square", [2], ()),
        ("square", [3], ()),
        ("total", [], (0, 1, 2)),
    ]


def test_map_passes_each_item_first_and_the_rest_to_every_call() -> None:
    flow = add.map([1, 2], 10)
    assert shape(flow.submission()) == [("add", [1, 10], ()), ("add", [2, 10], ())]
    assert flow.submission().jobs[0].queue == "flows"  # the declared options


def test_a_chain_runs_each_step_after_the_one_before() -> None:
    flow = add.step(1, 2).then(square.step(3)).then(total)
    assert shape(flow.submission()) == [
        ("add", [1, 2], ()),
        ("square", [3], (0,)),
        ("total", [], (1,)),
    ]


def test_a_step_then_a_map_is_a_fan_out() -> None:
    flow = add.step(0).then(square.map([1, 2])).then(total)
    assert shape(flow.submission()) == [
        ("add", [0], ()),
        ("square", [1], (0,)),
        ("square", [2], (0,)),
        ("total", [], (1, 2)),
    ]


def test_a_diamond_names_its_first_step_twice_and_submits_it_once() -> None:
    start = add.step(1)
    flow = taskq.group(start.then(square.step(2)), start.then(square.step(3))).then(total)
    assert shape(flow.submission()) == [
        ("add", [1], ()),
        ("square", [2], (0,)),
        ("square", [3], (0,)),
        ("total", [], (1, 2)),
    ]


def test_a_step_after_several_named_steps_waits_for_each() -> None:
    a, b, c = add.step(1), add.step(2), add.step(3)
    merge = total.step()
    flow = taskq.group(a.then(merge), b.then(merge), c)
    assert shape(flow.submission()) == [
        ("add", [1], ()),
        ("add", [2], ()),
        ("total", [], (0, 1)),
        ("add", [3], ()),
    ]


def test_targets_given_by_name_take_options_as_keywords() -> None:
    flow = taskq.step(SQUARE, 4, queue="q", run_anyway=True).then(f"{SQUARE}")
    submission = flow.submission(name="n", idempotency_key="k", submitter="me")
    first, second = submission.jobs
    assert (first.queue, first.run_anyway, first.payload["args"]) == ("q", True, [4])
    assert (second.queue, second.run_anyway, second.payload["args"]) == ("default", False, [])
    assert (submission.name, submission.idempotency_key, submission.submitter) == ("n", "k", "me")
    assert {job.submitter for job in submission.jobs} == {"me"}


def test_run_anyway_is_a_step_s_own_option() -> None:
    flow = fail.step().then(total.options(run_anyway=True))
    assert [job.run_anyway for job in flow.submission().jobs] == [False, True]


def test_flows_are_values_that_then_does_not_change() -> None:
    first = square.step(1)
    first.then(total)
    assert len(first) == 1
    assert shape(first.submission()) == [("square", [1], ())]


def test_an_empty_map_then_a_step_is_the_step_alone() -> None:
    assert shape(square.map([]).then(total).submission()) == [("total", [], ())]


@pytest.mark.parametrize("empty", [square.map([]), taskq.group()], ids=["map", "group"])
def test_an_empty_flow_in_a_chain_passes_the_steps_before_it_on(empty: taskq.Flow) -> None:
    # download.then(process.map(paths)).then(report), with no paths: report after download.
    chained = add.step(1).then(empty).then(total)
    assert shape(chained.submission()) == shape(add.step(1).then(total).submission())
    assert shape(chained.submission()) == [("add", [1], ()), ("total", [], (0,))]
    fan_in = add.step(0).then(square.map([1, 2])).then(empty).then(total)
    assert shape(fan_in.submission())[-1] == ("total", [], (1, 2))
    after_group = taskq.group(add.step(1), empty).then(total)
    assert shape(after_group.submission()) == [("add", [1], ()), ("total", [], (0,))]
    assert shape(empty.then(total).submission()) == [("total", [], ())]
    assert len(taskq.group(empty, empty)) == 0


def test_a_step_after_itself_is_refused_with_the_steps_that_wait_on_each_other() -> None:
    a = square.step(1)
    b = a.then(square.step(2))
    with pytest.raises(errors.InvalidJob, match=r"square\(1\), square\(2\) would wait") as info:
        b.then(a)
    assert info.value.field == "after"
    with pytest.raises(errors.InvalidJob, match="cannot run after itself"):
        a.then(a)
    # Two flows that each order the same two steps the other way round.
    c, d = add.step(1), add.step(2)
    with pytest.raises(errors.InvalidJob, match=r"add\(1\), add\(2\) would wait"):
        taskq.group(c.then(d), d.then(c).then(total))


def test_a_bad_step_is_refused_by_its_name_before_anything_is_sent() -> None:
    # Named by its path, whose arguments only a store's declarations check: too big to send.
    flow = square.step(1).then(taskq.step("tests.support.workflow_jobs:add", "x" * 2_000_000))
    with pytest.raises(errors.InvalidJob, match=r"step add\('xxx.*bytes") as info:
        flow.submission()
    assert info.value.field is not None


def test_a_bad_target_or_call_is_refused_when_the_step_is_built() -> None:
    with pytest.raises(errors.InvalidJob, match="square"):
        square.step(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(errors.InvalidJob, match="unknown option") as refused:
        taskq.step(SQUARE, 1, width=3)
    # Said of step, where it was given, with the way to pass the call's own keyword.
    message = str(refused.value)
    assert 'step("pkg.mod:f", ...) takes the call\'s positional arguments' in message
    assert message.endswith("the call's keyword arguments go in kwargs={'width': ...}")
    assert "submit " not in message
    assert refused.value.field == "width"
    with pytest.raises(errors.InvalidJob, match=r"priorty \(did you mean priority\?\)"):
        taskq.step(SQUARE, 1, priorty=3)


def test_a_declared_job_given_bare_is_a_step_without_arguments() -> None:
    as_step = total.step().then(square.step(2)).submission()
    assert shape(total.then(square.step(2)).submission()) == shape(as_step)
    assert shape(total.then(total).submission()) == [("total", [], ()), ("total", [], (0,))]
    with pytest.raises(errors.InvalidJob, match="missing a required argument: 'x'"):
        square.then(total)  # square takes an argument: its bare step is refused


def test_after_is_given_per_call_never_declared() -> None:
    with pytest.raises(errors.InvalidJob, match=r"\.options"):
        taskq.job(after=[1])
    assert square.options(after=[7]).spec(2).after == (7,)


def test_a_step_with_an_idempotency_key_of_its_own_is_refused_by_name() -> None:
    flow = add.step(1).then(add.options(idempotency_key="mine").step(2))
    with pytest.raises(errors.InvalidJob) as refused:
        flow.submission(idempotency_key="whole")
    assert str(refused.value) == (
        "step add(2): a step of a workflow takes no idempotency key of its own: give the "
        "whole workflow one (submit_workflow(flow, idempotency_key=...)); a spawn is "
        "written once per attempt"
    )
    assert refused.value.field == "idempotency_key"
