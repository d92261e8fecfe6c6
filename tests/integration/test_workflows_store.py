"""Workflows on both stores: jobs released, cancelled and revived by their parents' ends.

Each test works in queues of its own (the rqlite cluster is shared) and
injects the store's time. Every release and cascade is checked right after
the write that should make it: the settling is part of that write, so there
is nothing to wait for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
import pytest

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops import workflows as workflows_ops
from taskq.broker.ops.claims import (
    FIRST_PARENTS_BYTES,
    FIRST_PARENTS_COUNT,
    ClaimRequest,
    job_claim,
)
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_cancel, job_get, job_list, job_retry
from taskq.broker.ops.leases import Report, job_report, job_report_claim
from taskq.broker.ops.maintenance import job_prune, job_requeue_expired
from taskq.broker.ops.plan import Op
from taskq.broker.ops.relatives import job_parent_results, job_relatives
from taskq.broker.ops.workflows import (
    workflow_cancel,
    workflow_edges,
    workflow_get,
    workflow_list,
    workflow_retry,
    workflow_submit,
)
from taskq.broker.records import (
    ClaimedJob,
    Fenced,
    JobEdge,
    JobSpec,
    JobState,
    Relatives,
    WorkflowStatus,
    WorkflowSubmission,
)
from taskq.broker.stores.store import Consistency, Statement, Store
from tests.support.reports import completed, failed, report_one

T = TypeVar("T")
T0 = 1_800_000_000.0
LEASE = 30.0
BOOM = {"type": "Boom", "message": "on purpose"}

Run = Callable[[Op[Any]], Any]


@pytest.fixture
def queue() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def run(store: Store) -> Run:
    def carry_out(op: Op[T]) -> T:
        return plan.run(store, op)

    return carry_out


def _spec(
    queue: str,
    tag: Any = None,
    *,
    after: tuple[int, ...] = (),
    run_anyway: bool = False,
    **options: Any,
) -> JobSpec:
    spec = call_spec("tests.support.jobs:echo", [tag], queue=queue, **options)
    return msgspec.structs.replace(spec, after=after, run_anyway=run_anyway)


def _submit(run: Run, queue: str, parents: Sequence[Sequence[int]], **options: Any) -> list[int]:
    """A workflow of ``len(parents)`` jobs in ``queue``, job i after the jobs ``parents[i]``."""
    submission = WorkflowSubmission(
        jobs=tuple(_spec(queue, index) for index in range(len(parents))),
        parents=tuple(tuple(p) for p in parents),
        **options,
    )
    return list(run(workflow_submit(submission, now=T0)).job_ids)


def _states(run: Run, ids: Sequence[int]) -> list[JobState]:
    return [run(job_get(job_id, consistency=Consistency.LINEARIZABLE)).state for job_id in ids]


def _claim(run: Run, queue: str, limit: int = 10) -> dict[int, ClaimedJob]:
    claimed = run(job_claim("w1", [queue], limit=limit, lease_seconds=LEASE, now=T0))
    return {job.lease.job_id: job for job in claimed}


def _complete(run: Run, job: ClaimedJob, result: Any = None) -> None:
    assert run(report_one(completed(job.lease, result), now=T0)) is Fenced.ACCEPTED


def _fail(run: Run, job: ClaimedJob) -> None:
    assert run(report_one(failed(job.lease, BOOM, retryable=False), now=T0)) is Fenced.ACCEPTED


def _row_count(store: Store, sql: str, **params: Any) -> int:
    rows = store.query(Statement(sql, params), consistency=Consistency.LINEARIZABLE)
    return int(rows[0]["n"])


# -- release ------------------------------------------------------------------------


def test_a_report_tells_where_it_left_released_jobs_its_claim_did_not_take(
    run: Run, queue: str
) -> None:
    other = f"{queue}-other"
    submission = WorkflowSubmission(
        jobs=(_spec(queue, "parent"), _spec(queue, "same"), _spec(other, "other")),
        parents=((), (0,), (0,)),
    )
    parent, same, released = run(workflow_submit(submission, now=T0)).job_ids
    (job,) = _claim(run, queue).values()
    claim = ClaimRequest("w1", (queue,), limit=5, lease_seconds=LEASE)
    answer = run(job_report_claim([completed(job.lease, "done")], claim, now=T0))
    assert answer.fenced == [Fenced.ACCEPTED]
    # The child in the reporter's queue was claimed by the same write: only the other's
    # queue has a job left for idle workers (the hint a worker sends on a cluster).
    assert [claimed.lease.job_id for claimed in answer.claimed] == [same]
    assert answer.freed_queues == {other}
    assert _states(run, [parent, released]) == [JobState.SUCCEEDED, JobState.QUEUED]
    # A report that releases nothing leaves no queue.
    (last,) = answer.claimed
    assert run(job_report_claim([completed(last.lease, "done")], None, now=T0)).freed_queues == (
        frozenset()
    )


def test_a_chain_runs_one_job_after_the_other(run: Run, queue: str) -> None:
    first, second, third = _submit(run, queue, [(), (0,), (1,)])
    assert _states(run, [first, second, third]) == [JobState.QUEUED, *[JobState.WAITING] * 2]
    claimed = _claim(run, queue)
    assert list(claimed) == [first], "a waiting job was claimable"
    assert (claimed[first].parent_count, claimed[first].has_children) == (0, True)
    assert claimed[first].first_parents is None
    _complete(run, claimed[first], "one")
    claimed = _claim(run, queue)
    assert list(claimed) == [second]
    assert (claimed[second].parent_count, claimed[second].has_children) == (1, True)
    assert _states(run, [third]) == [JobState.WAITING]
    _complete(run, claimed[second], "two")
    claimed = _claim(run, queue)
    assert list(claimed) == [third]
    assert not claimed[third].has_children  # its report need not hurry: it frees no job
    [result] = run(job_parent_results(third))
    assert (result.position, result.job_id, result.state, result.result) == (
        0,
        second,
        JobState.SUCCEEDED,
        "two",
    )
    assert claimed[third].first_parents == (result,), "the claim hands over what the read gives"


def test_a_fan_in_of_ten_thousand_is_released_by_the_last_report(
    run: Run, queue: str, store: Store
) -> None:
    width = 10_000
    ids = _submit(run, queue, [*[()] * width, range(width)])
    fan_in = ids[-1]
    claimed: dict[int, ClaimedJob] = {}
    while len(claimed) < width:
        batch = run(job_claim("w1", [queue], limit=1000, lease_seconds=LEASE, now=T0))
        assert batch, "the parents ran out before all were claimed"
        claimed.update({job.lease.job_id: job for job in batch})
    assert fan_in not in claimed
    parents = ids[:-1]
    for start in range(0, width - 1, 1000):
        reports = [
            completed(claimed[job_id].lease, job_id)
            for job_id in parents[start : min(start + 1000, width - 1)]
        ]
        assert set(run(job_report(reports, now=T0))) == {Fenced.ACCEPTED}
    fan_in_row = run(job_get(fan_in, consistency=Consistency.LINEARIZABLE))
    assert (fan_in_row.state, fan_in_row.parents_left) == (JobState.WAITING, 1)
    _complete(run, claimed[parents[-1]], parents[-1])
    assert _states(run, [fan_in]) == [JobState.QUEUED]
    [claimed_fan_in] = _claim(run, queue).values()
    assert claimed_fan_in.lease.job_id == fan_in
    first = claimed_fan_in.first_parents
    assert first is not None
    assert [(r.position, r.job_id, r.result) for r in first] == [
        (position, job_id, job_id) for position, job_id in enumerate(parents[:FIRST_PARENTS_COUNT])
    ], "the claim hands over only the first parents of a wide fan-in"
    seen: list[int] = []
    position = -1
    while page := run(job_parent_results(fan_in, after_position=position, limit=1000)):
        assert [result.position for result in page] == list(
            range(position + 1, position + 1 + len(page))
        )
        assert all(result.result == result.job_id for result in page)
        seen += [result.job_id for result in page]
        position = page[-1].position
    assert seen == parents


def test_a_diamond_waits_for_both_sides(run: Run, queue: str) -> None:
    top, left, right, bottom = _submit(run, queue, [(), (0,), (0,), (1, 2)])
    _complete(run, _claim(run, queue)[top])
    sides = _claim(run, queue)
    assert set(sides) == {left, right}
    _complete(run, sides[right])
    assert _states(run, [bottom]) == [JobState.WAITING]
    _complete(run, sides[left])
    assert list(_claim(run, queue)) == [bottom]
    assert run(workflow_edges(_workflow_of(run, top))) == [
        JobEdge(top, left),
        JobEdge(top, right),
        JobEdge(left, bottom),
        JobEdge(right, bottom),
    ]
    relatives = run(job_relatives(bottom))
    assert relatives.parents == ((left, JobState.SUCCEEDED), (right, JobState.SUCCEEDED))
    assert relatives.children == ()
    assert run(job_relatives(top)).children == (
        (left, JobState.SUCCEEDED),
        (right, JobState.SUCCEEDED),
    )


def _workflow_of(run: Run, job_id: int) -> int:
    workflow_id = run(job_get(job_id)).workflow_id
    assert workflow_id is not None
    return int(workflow_id)


def test_a_job_enqueued_after_stored_jobs_waits_or_goes_at_once(run: Run, queue: str) -> None:
    [parent] = run(job_enqueue([_spec(queue)], now=T0))
    [child] = run(job_enqueue([_spec(queue, after=(parent,))], now=T0))
    assert _states(run, [child]) == [JobState.WAITING]
    assert run(job_get(child)).workflow_id is None, "a job joins its parents' workflow: none"
    _complete(run, _claim(run, queue)[parent])
    assert _states(run, [child]) == [JobState.QUEUED]
    # A parent that has ended already releases its new child in the same write.
    [late] = run(job_enqueue([_spec(queue, after=(parent,))], now=T0))
    assert _states(run, [late]) == [JobState.QUEUED]
    workflow = _submit(run, queue, [()])
    [joined] = run(job_enqueue([_spec(queue, after=(workflow[0],))], now=T0))
    assert run(job_get(joined)).workflow_id == _workflow_of(run, workflow[0])


# -- failure, cancel, retry -----------------------------------------------------------


def test_a_failure_cancels_the_descendants_and_nothing_else(run: Run, queue: str) -> None:
    submission = WorkflowSubmission(
        jobs=(
            _spec(queue, "root"),
            _spec(queue, "child"),
            _spec(queue, "grandchild"),
            _spec(queue, "great-grandchild"),
            _spec(queue, "anyway", run_anyway=True),
            _spec(queue, "after anyway"),
            _spec(queue, "sibling"),
        ),
        parents=((), (0,), (1,), (2,), (1,), (4,), (0,)),
    )
    ids = list(run(workflow_submit(submission, now=T0)).job_ids)
    root, child, grandchild, great, anyway, after_anyway, sibling = ids
    plain = run(job_enqueue([_spec(queue, "plain")], now=T0))
    other = _submit(run, queue, [(), (0,)])
    claimed = _claim(run, queue)
    assert set(claimed) == {root, *plain, other[0]}
    _complete(run, claimed[root])
    claimed = _claim(run, queue)
    assert set(claimed) == {child, sibling}
    _fail(run, claimed[child])
    assert _states(run, [grandchild, great]) == [JobState.CANCELLED] * 2
    assert run(job_get(grandchild)).error == {
        "type": "ParentFailed",
        "message": f"parent job {child} ended failed",
        "parent": child,
        "cause": child,
        "cause_state": "failed",
    }
    # Deeper down, the job names the step whose failure began the cascade too.
    assert run(job_get(great)).error == {
        "type": "ParentFailed",
        "message": f"parent job {grandchild} ended cancelled, as job {child} ended failed",
        "parent": grandchild,
        "cause": child,
        "cause_state": "failed",
    }
    # The job that runs anyway is queued; the one after it waits for it, as usual.
    assert _states(run, [anyway, after_anyway]) == [JobState.QUEUED, JobState.WAITING]
    assert _states(run, [root, sibling, *plain, *other]) == [
        JobState.SUCCEEDED,
        JobState.RUNNING,
        *[JobState.RUNNING] * len(plain),
        JobState.RUNNING,
        JobState.WAITING,
    ]


def test_a_run_anyway_child_runs_after_a_failed_parent(run: Run, queue: str) -> None:
    submission = WorkflowSubmission(
        jobs=(_spec(queue, 0), _spec(queue, 1), _spec(queue, 2, run_anyway=True)),
        parents=((), (), (0, 1)),
    )
    first, second, child = run(workflow_submit(submission, now=T0)).job_ids
    claimed = _claim(run, queue)
    _fail(run, claimed[first])
    assert _states(run, [child]) == [JobState.WAITING], "it waits for its other parent"
    _complete(run, claimed[second], "fine")
    [claimed_child] = _claim(run, queue).values()
    assert claimed_child.lease.job_id == child
    results = run(job_parent_results(child))
    assert [(r.state, r.error, r.result) for r in results] == [
        (JobState.FAILED, BOOM, None),
        (JobState.SUCCEEDED, None, "fine"),
    ]
    assert claimed_child.first_parents == tuple(results)


def test_a_claim_hands_over_any_json_result_as_the_read_gives_it(run: Run, queue: str) -> None:
    awkward = [
        2**70,  # past 64 bits: a decoder that reads it as a float loses digits
        {"name": "caf\u00e9 \U0001f600", "quote": '"', "nested": [[], {}, None]},
        None,
        0.1 + 0.2,
        -(2**63) - 1,
    ]
    ids = _submit(run, queue, [*[()] * len(awkward), range(len(awkward))])
    claimed = _claim(run, queue)
    for job_id, result in zip(ids, awkward, strict=False):
        _complete(run, claimed[job_id], result)
    [claimed_child] = _claim(run, queue).values()
    assert claimed_child.lease.job_id == ids[-1]
    handed_over = claimed_child.first_parents
    assert handed_over == tuple(run(job_parent_results(ids[-1])))
    assert [r.result for r in handed_over] == awkward
    assert all(type(r.result) is type(value) for r, value in zip(handed_over, awkward, strict=True))


def test_a_claim_hands_over_parents_results_only_up_to_its_byte_budget(
    run: Run, queue: str
) -> None:
    first, second, third, child = _submit(run, queue, [(), (), (), (0, 1, 2)])
    claimed = _claim(run, queue)
    half = "x" * (FIRST_PARENTS_BYTES // 2)
    for job_id, result in ((first, "small"), (second, half), (third, half)):
        _complete(run, claimed[job_id], result)
    [claimed_child] = _claim(run, queue).values()
    assert claimed_child.lease.job_id == child
    handed_over = claimed_child.first_parents
    assert handed_over is not None
    assert [r.job_id for r in handed_over] == [first, second], "the third would pass the budget"
    assert [r.result for r in handed_over] == ["small", half]


def test_retrying_the_failed_parent_revives_what_it_cancelled(run: Run, queue: str) -> None:
    root, child, grandchild = _submit(run, queue, [(), (0,), (1,)])
    _fail(run, _claim(run, queue)[root])
    assert _states(run, [child, grandchild]) == [JobState.CANCELLED] * 2
    assert run(job_retry([root], now=T0)) == [root]
    assert _states(run, [root, child, grandchild]) == [
        JobState.QUEUED,
        JobState.WAITING,
        JobState.WAITING,
    ]
    assert run(job_get(grandchild)).error is None
    assert run(job_get(child)).parents_left == 1
    _complete(run, _claim(run, queue)[root])
    assert list(_claim(run, queue)) == [child]


def test_a_retried_child_waits_again_or_is_cancelled_again(run: Run, queue: str) -> None:
    good, bad, child = _submit(run, queue, [(), (), (0, 1)])
    claimed = _claim(run, queue)
    _fail(run, claimed[bad])
    assert run(job_retry([child], now=T0)) == [child]
    assert _states(run, [child]) == [JobState.CANCELLED], "its parent still failed"
    run(job_retry([bad], now=T0))
    assert _states(run, [child]) == [JobState.WAITING]
    _complete(run, claimed[good])
    _complete(run, _claim(run, queue)[bad])
    assert list(_claim(run, queue)) == [child]


def test_a_retry_by_hand_that_would_be_cancelled_again_is_refused_and_moves_nothing(
    run: Run, queue: str
) -> None:
    root, child, grandchild, other = _submit(run, queue, [(), (0,), (1,), ()])
    _fail(run, _claim(run, queue)[root])
    run(job_cancel([other], now=T0))
    before = [run(job_get(job_id)) for job_id in (root, child, grandchild, other)]
    with pytest.raises(errors.WrongState) as refused:
        run(job_retry([other, grandchild], now=T0 + 1, refuse_recancelled=True))
    assert str(refused.value).startswith(
        f"job {grandchild} not retried: it waits for job {child}, which ended cancelled"
        f" (as job {root} ended failed), so it would be cancelled again at once; retry job {root}"
    )
    assert str(refused.value).endswith(
        f", or retry workflow {run(job_get(root)).workflow_id} whole"
    )
    assert [run(job_get(job_id)) for job_id in (root, child, grandchild, other)] == before
    # With the job where the failure began, all of it comes back; so does the whole.
    moved = run(job_retry([root, grandchild], now=T0 + 1, refuse_recancelled=True))
    assert moved == [root, grandchild]
    assert _states(run, [root, child, grandchild]) == [
        JobState.QUEUED,
        JobState.WAITING,
        JobState.WAITING,
    ]


def test_cancelling_a_job_cancels_the_jobs_waiting_on_it(run: Run, queue: str) -> None:
    root, child, grandchild, other = _submit(run, queue, [(), (0,), (1,), ()])
    result = run(job_cancel([child], now=T0))
    assert result.cancelled == (child,)
    assert _states(run, [root, child, grandchild, other]) == [
        JobState.QUEUED,
        JobState.CANCELLED,
        JobState.CANCELLED,
        JobState.QUEUED,
    ]
    assert run(job_get(grandchild)).error["parent"] == child
    # A job submitted later after the cancelled grandchild names the cancel's cause too.
    [late] = run(job_enqueue([_spec(queue, after=(grandchild,))], now=T0))
    assert run(job_get(late)).error == {
        "type": "ParentFailed",
        "message": f"parent job {grandchild} ended cancelled, as job {child} ended cancelled",
        "parent": grandchild,
        "cause": child,
        "cause_state": "cancelled",
    }
    run(job_retry([child], now=T0))
    assert _states(run, [child, grandchild]) == [JobState.WAITING] * 2
    # Waiting again, the grandchild no longer says a parent's end cancelled it.
    assert run(job_get(grandchild)).error is None


def test_an_expired_lease_that_ends_a_parent_dead_cancels_its_children(
    run: Run, queue: str
) -> None:
    [parent] = run(job_enqueue([_spec(queue, max_attempts=1)], now=T0))
    [child] = run(job_enqueue([_spec(queue, after=(parent,))], now=T0))
    assert list(_claim(run, queue)) == [parent]
    moved = run(job_requeue_expired(now=T0 + LEASE + 1))
    assert parent in moved.dead
    assert _states(run, [child]) == [JobState.CANCELLED]


def test_a_workflow_is_cancelled_and_retried_whole(run: Run, queue: str) -> None:
    root, child, grandchild = _submit(run, queue, [(), (0,), (1,)])
    workflow_id = _workflow_of(run, root)
    claimed = _claim(run, queue)
    assert run(workflow_cancel(workflow_id, now=T0)) == 3
    assert _states(run, [root, child, grandchild]) == [
        JobState.RUNNING,
        JobState.CANCELLED,
        JobState.CANCELLED,
    ]
    assert run(job_get(root)).cancel_requested
    assert run(report_one(completed(claimed[root].lease, None), now=T0)) is Fenced.ACCEPTED
    assert run(workflow_retry(workflow_id, now=T0)) == 2
    assert _states(run, [child, grandchild]) == [JobState.QUEUED, JobState.WAITING]
    counts = run(workflow_get(workflow_id)).counts
    assert (counts[JobState.SUCCEEDED], counts[JobState.QUEUED], counts[JobState.WAITING]) == (
        1,
        1,
        1,
    )
    with pytest.raises(errors.WorkflowNotFound):
        run(workflow_get(2**40))


def test_a_workflows_status_follows_its_jobs_and_a_listing_by_status_reads_past_the_rest(
    run: Run, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read two workflows at a time (or a page, if more), so that a listing of one has
    # to go on past a read.
    monkeypatch.setattr(workflows_ops, "_STATUS_SCAN_PAGE", 2)

    def submitted(*, alone: bool = False) -> int:
        submission = (
            WorkflowSubmission(jobs=(_spec(queue),))
            if alone
            else WorkflowSubmission(jobs=(_spec(queue), _spec(queue)), parents=((), (0,)))
        )
        return run(workflow_submit(msgspec.structs.replace(submission, name=queue), now=T0)).id

    done, broken = submitted(), submitted()
    for job in _claim(run, queue).values():
        if _workflow_of(run, job.lease.job_id) == done:
            _complete(run, job)
        else:
            _fail(run, job)
    _complete(run, next(iter(_claim(run, queue).values())))  # the child of ``done``
    cancelled = submitted()
    run(workflow_cancel(cancelled, now=T0))
    claimed = submitted(alone=True)
    [running_job] = _claim(run, queue)  # its one job, running: none of it waits or is queued
    assert _workflow_of(run, running_job) == claimed
    waiting, newest = submitted(), submitted()
    expected = {
        done: WorkflowStatus.SUCCEEDED,
        broken: WorkflowStatus.FAILED,
        cancelled: WorkflowStatus.CANCELLED,
        claimed: WorkflowStatus.RUNNING,
        waiting: WorkflowStatus.RUNNING,
        newest: WorkflowStatus.RUNNING,
    }
    assert {wid: run(workflow_get(wid)).status for wid in expected} == expected
    assert {info.id: info.status for info in run(workflow_list(name=queue))} == expected

    def listed(status: WorkflowStatus | str, **page: Any) -> list[int]:
        return [info.id for info in run(workflow_list(name=queue, status=status, **page))]

    # The running ones are read from their unfinished jobs, or, past a number of
    # those, by the same pass as the other statuses: the two find the same.
    for unfinished_read_most in (10**9, 0):
        monkeypatch.setattr(workflows_ops, "_UNFINISHED_READ_MOST", unfinished_read_most)
        assert listed("running") == [newest, waiting, claimed]
        assert listed(WorkflowStatus.RUNNING, limit=1) == [newest]
        assert listed("running", before=newest, limit=1) == [waiting]
        assert listed("running", before=waiting) == [claimed]
        assert listed("running", before=claimed) == []
        assert [info.counts for info in run(workflow_list(status="running", name=queue))] == [
            run(workflow_get(wid)).counts for wid in (newest, waiting, claimed)
        ]
        assert run(workflow_list(status="running", name=queue, submitter="nobody")) == []
    assert listed("cancelled") == [cancelled]
    assert listed("succeeded", limit=1) == [done]  # its third read of two
    assert listed("succeeded") == [done]
    assert listed("failed", before=broken) == []
    with pytest.raises(errors.InvalidJob, match="no workflow status 'done'") as refused:
        listed("done")
    assert refused.value.field == "status"


# -- run-time fan-out ----------------------------------------------------------------


def test_a_completed_job_spawns_a_fan_out_and_its_fan_in(run: Run, queue: str) -> None:
    [job_id] = run(job_enqueue([_spec(queue, "mapper", submitter="ana")], now=T0))
    spawned = WorkflowSubmission(
        jobs=(
            *(_spec(queue, part) for part in range(3)),
            _spec(queue, "reduce", submitter="bo"),
        ),
        parents=((), (), (), (0, 1, 2)),
    )
    [job] = _claim(run, queue).values()
    report = msgspec_replace(completed(job.lease, "mapped"), spawn=spawned)
    assert run(report_one(report, now=T0)) is Fenced.ACCEPTED
    workflow_id = _workflow_of(run, job_id)
    jobs = sorted(run(job_list(workflow_id=workflow_id, limit=100)), key=lambda job: job.id)
    assert [job.state for job in jobs] == [
        JobState.SUCCEEDED,
        JobState.QUEUED,
        JobState.QUEUED,
        JobState.QUEUED,
        JobState.WAITING,
    ]
    # Jobs that name no submitter, and the new workflow, are the spawning job's submitter's.
    assert [job.submitter for job in jobs] == ["ana", "ana", "ana", "ana", "bo"]
    assert run(workflow_get(workflow_id)).submitter == "ana"
    reduce_id = jobs[-1].id
    part_ids = [job.id for job in jobs[1:4]]
    spawns = [JobEdge(job_id, child.id, spawned=True) for child in jobs[1:]]
    dependencies = [JobEdge(part, reduce_id) for part in part_ids]
    assert run(workflow_edges(workflow_id)) == [*spawns, *dependencies]
    family = run(job_relatives(job_id))
    assert family.spawned == tuple((child.id, child.state) for child in jobs[1:])
    assert (family.parents, family.children, family.spawned_by) == ((), (), None)
    assert run(job_relatives(reduce_id)).spawned_by == (job_id, JobState.SUCCEEDED)
    parts = _claim(run, queue)
    assert set(parts) == set(part_ids)
    for part in parts.values():
        assert _states(run, [reduce_id]) == [JobState.WAITING]
        _complete(run, part)
    assert list(_claim(run, queue)) == [reduce_id]


def test_a_spawn_may_wait_on_its_own_job_and_a_fenced_out_one_writes_nothing(
    run: Run, queue: str, store: Store
) -> None:
    [job_id] = run(job_enqueue([_spec(queue, "mapper")], now=T0))
    [job] = _claim(run, queue).values()
    stale = job.lease
    run(job_requeue_expired(now=T0 + LEASE + 1))
    spawn = WorkflowSubmission(jobs=(_spec(queue, "late", after=(job_id,)),))
    report = msgspec_replace(completed(stale, None), spawn=spawn)
    assert run(report_one(report, now=T0 + LEASE + 1)) is Fenced.LEASE_LOST
    assert _jobs_in(store, queue) == 1
    assert run(job_get(job_id)).workflow_id is None
    assert _workflows_keyed(store, f"spawn:{stale.token}") == 0
    flagged = "SELECT count(*) AS n FROM jobs WHERE id = :job_id AND has_children = 1"
    assert _row_count(store, flagged, job_id=job_id) == 0, "a refused report flagged its job"
    claimed = run(job_claim("w1", [queue], limit=1, lease_seconds=LEASE, now=T0 + LEASE + 2))
    report = msgspec_replace(completed(claimed[0].lease, "done"), spawn=spawn)
    assert run(report_one(report, now=T0 + LEASE + 2)) is Fenced.ACCEPTED
    workflow_id = _workflow_of(run, job_id)
    [late] = [job for job in run(job_list(workflow_id=workflow_id)) if job.id != job_id]
    assert late.state is JobState.QUEUED, "its parent, the spawning job, has completed"
    assert run(workflow_edges(workflow_id)) == [
        JobEdge(job_id, late.id, spawned=True),
        JobEdge(job_id, late.id),
    ]
    # Its spawner is its parent too: the relatives name it as a parent only.
    assert run(job_relatives(late.id)) == Relatives(
        parents=((job_id, JobState.SUCCEEDED),), children=()
    )
    assert run(job_relatives(job_id)) == Relatives(
        parents=(), children=((late.id, JobState.QUEUED),)
    )


def msgspec_replace(report: Report, **changes: Any) -> Report:
    return msgspec.structs.replace(report, **changes)


def _jobs_in(store: Store, queue: str) -> int:
    return _row_count(store, "SELECT count(*) AS n FROM jobs WHERE queue = :queue", queue=queue)


def _workflows_keyed(store: Store, key: str) -> int:
    return _row_count(
        store, "SELECT count(*) AS n FROM workflows WHERE idempotency_key = :key", key=key
    )


# -- refusals, resends, pruning --------------------------------------------------------


@pytest.mark.parametrize(
    ("parents", "says"),
    [
        (((1,), (0,)), "cycle"),
        (((), (), (2,)), "cycle"),
        (((), (5,)), "out of the range"),
        (((), (-1,)), "out of the range"),
        (((), (0, 0)), "job 0 given more than once"),
        (((), (), (), ()), "4 jobs' parents for 3 jobs"),
    ],
)
def test_a_workflow_that_could_never_run_is_refused_whole(
    run: Run, store: Store, queue: str, parents: tuple[tuple[int, ...], ...], says: str
) -> None:
    key = f"key-{queue}"
    submission = WorkflowSubmission(
        jobs=tuple(_spec(queue, i) for i in range(3)), parents=parents, idempotency_key=key
    )
    with pytest.raises(errors.InvalidJob, match=says) as refused:
        run(workflow_submit(submission, now=T0))
    assert refused.value.field == "after"
    assert (_jobs_in(store, queue), _workflows_keyed(store, key)) == (0, 0)


def test_stored_parents_that_are_unknown_pruned_or_foreign_are_refused(
    run: Run, store: Store, queue: str
) -> None:
    mine = _submit(run, queue, [()])
    theirs = _submit(run, queue, [()])
    workflow_id = _workflow_of(run, mine[0])
    [gone] = run(job_enqueue([_spec(queue)], now=T0))
    run(job_cancel([gone], now=T0))
    assert run(job_prune(retention_seconds=1.0, now=T0 + 10)) >= 1
    before = _jobs_in(store, queue)
    for stored, says in [
        (2**40, "no job has the id"),
        (gone, "no job has the id"),
        (theirs[0], "not in workflow"),
    ]:
        extension = WorkflowSubmission(
            jobs=(_spec(queue, after=(stored,)),), workflow_id=workflow_id
        )
        with pytest.raises(errors.InvalidJob, match=says) as refused:
            run(workflow_submit(extension, now=T0))
        assert refused.value.field == "after"
    fresh = WorkflowSubmission(jobs=(_spec(queue, after=(mine[0],)),))
    with pytest.raises(errors.InvalidJob, match="a new workflow") as refused:
        run(workflow_submit(fresh, now=T0))
    for after, says in [
        ((gone,), "no job has the id"),
        ((mine[0], theirs[0]), "different workflows"),
    ]:
        with pytest.raises(errors.InvalidJob, match=says) as refused:
            run(job_enqueue([_spec(queue, after=after)], now=T0))
        assert refused.value.field == "after"
    assert _jobs_in(store, queue) == before


def test_a_resent_workflow_returns_the_same_ids(run: Run, store: Store, queue: str) -> None:
    key = f"nightly-{queue}"
    submission = WorkflowSubmission(
        jobs=(_spec(queue, 0), _spec(queue, 1)), parents=((), (0,)), idempotency_key=key, name="n"
    )
    first = run(workflow_submit(submission, now=T0))
    again = run(workflow_submit(submission, now=T0 + 5))
    assert again == first
    assert _jobs_in(store, queue) == 2
    changed = msgspec.structs.replace(submission, parents=((), ()))
    with pytest.raises(errors.IdempotencyConflict):
        run(workflow_submit(changed, now=T0))
    own_key = WorkflowSubmission(jobs=(_spec(queue, idempotency_key="mine"),))
    with pytest.raises(errors.InvalidJob) as refused:
        run(workflow_submit(own_key, now=T0))
    assert refused.value.field == "idempotency_key"
    assert _jobs_in(store, queue) == 2


def test_a_parent_is_not_pruned_while_a_child_has_yet_to_finish(
    run: Run, store: Store, queue: str
) -> None:
    parent, child = _submit(run, queue, [(), (0,)])
    workflow_id = _workflow_of(run, parent)
    _complete(run, _claim(run, queue)[parent], "kept")
    later = T0 + 100
    run(job_prune(retention_seconds=10.0, now=later))
    assert run(job_get(parent)) is not None, "pruned while its child had yet to read it"
    [result] = run(job_parent_results(child))
    assert result.result == "kept"
    claimed = run(job_claim("w1", [queue], limit=1, lease_seconds=LEASE, now=later))
    assert run(report_one(completed(claimed[0].lease, None), now=later)) is Fenced.ACCEPTED
    run(job_prune(retention_seconds=10.0, now=later + 100))
    assert run(job_get(parent)) is None
    assert run(job_get(child)) is None
    with pytest.raises(errors.WorkflowNotFound):
        run(workflow_get(workflow_id))
    edges = _row_count(
        store, "SELECT count(*) AS n FROM job_parents WHERE child_id = :child", child=child
    )
    assert edges == 0


def test_a_parent_is_kept_while_its_failed_child_may_be_retried_by_hand(
    run: Run, queue: str
) -> None:
    parent, child = _submit(run, queue, [(), (0,)])
    _complete(run, _claim(run, queue)[parent], "kept")
    [claimed] = run(job_claim("w1", [queue], limit=1, lease_seconds=LEASE, now=T0 + 90))
    ended = failed(claimed.lease, BOOM, retryable=False)
    assert run(report_one(ended, now=T0 + 90)) is Fenced.ACCEPTED
    later = T0 + 100
    # Past the parent's retention, not the dead child's: retried, it still reads the result.
    run(job_prune(retention_seconds=60.0, now=later))
    assert run(job_get(parent)) is not None, "pruned while its failed child could be retried"
    assert run(job_retry([child], now=later)) == [child]
    [result] = run(job_parent_results(child))
    assert result.result == "kept"


def test_a_parent_is_kept_while_a_child_its_sibling_cancelled_may_come_back(
    run: Run, store: Store, queue: str
) -> None:
    kept, bad, child = _submit(run, queue, [(), (), (0, 1)])
    claimed = _claim(run, queue)
    _complete(run, claimed[kept], "kept")
    failing = failed(claimed[bad].lease, BOOM, retryable=False)
    assert run(report_one(failing, now=T0 + 50)) is Fenced.ACCEPTED
    assert _states(run, [child]) == [JobState.CANCELLED]  # by bad's end: a retry revives it
    later = T0 + 100
    # Past kept's retention, not yet past the cancelled child's.
    run(job_prune(retention_seconds=60.0, now=later))
    assert run(job_get(kept)) is not None, "pruned while the child it ended could come back"
    assert run(job_retry([bad], now=later)) == [bad]
    assert _states(run, [bad, child]) == [JobState.QUEUED, JobState.WAITING]
    [again] = run(job_claim("w1", [queue], limit=1, lease_seconds=LEASE, now=later))
    assert run(report_one(completed(again.lease, "fixed"), now=later)) is Fenced.ACCEPTED
    results = run(job_parent_results(child))
    assert [(each.job_id, each.result) for each in results] == [(kept, "kept"), (bad, "fixed")]
    # Once the cancelled child is pruned, nothing can bring it back: its parents go too.
    run(job_cancel([child], now=later))
    run(job_prune(retention_seconds=10.0, now=later + 100))
    run(job_prune(retention_seconds=10.0, now=later + 100))
    assert [run(job_get(job_id)) for job_id in (kept, bad, child)] == [None, None, None]
