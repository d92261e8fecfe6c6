"""What taskq.Client says of a job not ended in time, and of one that ended cancelled:
what its record holds of how it got there, and what it waits on, not only its state.

On both stores and over HTTP, with test_client.py's fixtures; the test claims and
reports the attempts itself, as a worker would.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.leases import Report, ReportKind
from taskq.broker.records import AttemptReport, ClaimedJob
from taskq.broker.stores.store import Store
from tests.integration.test_client import backend, client, connect, queue, store
from tests.support.hinted_workers import register_worker
from tests.support.reports import released, report_one

__all__ = ["backend", "client", "connect", "queue", "store"]  # test_client.py's

RETRY_DELAY = 600.0  # the next attempt well after the test's waits


def _claim(store: Store, queue: str) -> ClaimedJob:
    [claimed] = plan.run(store, job_claim("stand-in", [queue], limit=1, lease_seconds=30))
    return claimed


def _fail_once(store: Store, queue: str, message: str) -> None:
    """Claim the queue's job and fail its attempt, its next one due in RETRY_DELAY."""
    error = {"type": "ValueError", "message": message, "traceback": "Traceback ..."}
    failure = Report(
        _claim(store, queue).lease,
        ReportKind.FAIL,
        AttemptReport(outcome="error"),
        error=error,
        retryable=True,
        retry_delay=RETRY_DELAY,
    )
    plan.run(store, report_one(failure))


def _timeout_of(handle: Any) -> str:
    with pytest.raises(errors.ResultTimeout) as ran_out:
        handle.result(timeout=0.2)
    return str(ran_out.value)


def _failure_of(handle: Any) -> str:
    with pytest.raises(errors.JobFailed) as failed:
        handle.result(timeout=10)
    return str(failed.value)


def test_a_wait_on_a_job_queued_for_a_retry_says_how_its_attempt_ended_and_when_the_next_runs(
    client: taskq.Client, store: Store, queue: str
) -> None:
    register_worker(store, f"{queue}-worker", [queue], None)
    handle = client.submit("m:f", queue=queue, unchecked=True, max_attempts=3)
    _fail_once(store, queue, "bad input:\n" + "x" * 300)
    said = _timeout_of(handle)
    # One line: the message's first line, its traceback left on the record.
    found = re.fullmatch(
        rf"job {handle.id} is still queued after 0\.2 s: attempt 1 failed "
        r"\(ValueError: bad input:\), attempt 2 of 3 runs at (.+)",
        said,
    )
    assert found is not None, said
    run_at = time.localtime(client.get(handle.id).run_at)
    assert found.group(1).endswith(time.strftime("%H:%M:%S", run_at))


def test_a_long_error_is_clipped_in_a_wait_that_ran_out(
    client: taskq.Client, store: Store, queue: str
) -> None:
    register_worker(store, f"{queue}-worker", [queue], None)
    handle = client.submit("m:f", queue=queue, unchecked=True, max_attempts=2)
    _fail_once(store, queue, "y" * 300)
    said = _timeout_of(handle)
    assert f"(ValueError: {'y' * 99}…), attempt 2 of 2 runs at " in said
    assert "\n" not in said


def test_a_wait_on_a_workflow_job_whose_parent_no_worker_serves_says_so(
    client: taskq.Client, store: Store, queue: str
) -> None:
    other = f"{queue}-parents"
    flow = taskq.step("m:f", 1, queue=other, unchecked=True).then(
        taskq.step("m:g", 2, queue=queue, unchecked=True)
    )
    submitted = client.submit_workflow(flow)
    parent, child = submitted.job_ids
    assert _timeout_of(taskq.JobHandle(client, child)) == (
        f"job {child} is still waiting after 0.2 s: job {parent} of its workflow "
        f"{submitted.id} is queued, and no active worker serves queue {other!r} "
        f"(start one: taskq-worker --queues {other} --modules m)"
    )
    register_worker(store, f"{other}-worker", [other], None)
    served_now = _timeout_of(taskq.JobHandle(client, child))
    assert served_now == f"job {child} is still waiting after 0.2 s"


def test_a_wait_on_a_job_after_a_parent_no_worker_serves_says_so(
    client: taskq.Client, store: Store, queue: str
) -> None:
    other = f"{queue}-parents"
    parent = client.submit("m:f", queue=other, unchecked=True)
    [child] = client.submit_many([taskq.call_spec("m:g", [2], queue=queue, after=[parent.id])])
    assert _timeout_of(child) == (
        f"job {child.id} is still waiting after 0.2 s: its parent job {parent.id} is queued, "
        f"and no active worker serves queue {other!r} "
        f"(start one: taskq-worker --queues {other} --modules m)"
    )


def test_a_wait_on_a_job_its_queue_holds_back_says_why(
    client: taskq.Client, store: Store, queue: str
) -> None:
    register_worker(store, f"{queue}-worker", [queue], None)  # served: held back all the same
    handle = client.submit("m:f", queue=queue, unchecked=True)
    client.pause(queue)
    assert _timeout_of(handle) == (
        f"job {handle.id} is still queued after 0.2 s: queue {queue!r} is paused "
        f"(taskq resume {queue} lets its jobs start)"
    )
    client.resume(queue)
    client.set_queue_limits(queue, max_running=0)
    assert _timeout_of(handle) == (
        f"job {handle.id} is still queued after 0.2 s: queue {queue!r} runs no job at once, "
        f"its max running being 0 (taskq limit {queue} --max-running N lets them start)"
    )


def test_a_job_cancelled_before_it_ran_says_so_and_its_children_name_it(
    client: taskq.Client, queue: str
) -> None:
    parent = client.submit("m:f", queue=queue, unchecked=True)
    [child] = client.submit_many([taskq.call_spec("m:g", [2], queue=queue, after=[parent.id])])
    parent.cancel()
    assert _failure_of(parent) == (
        f"job {parent.id} ended cancelled before it ran: cancelled by request while queued"
    )
    assert _failure_of(child) == (
        f"job {child.id} ended cancelled before it ran: "
        f"ParentFailed: parent job {parent.id} ended cancelled"
    )


def test_a_job_cancelled_while_running_says_which_attempt(
    client: taskq.Client, store: Store, queue: str
) -> None:
    handle = client.submit("m:f", queue=queue, unchecked=True, max_attempts=3)
    claimed = _claim(store, queue)
    assert handle.cancel().requested == (handle.id,)
    # The worker stops it and hands it back: the cancel asked for ends it.
    plan.run(store, report_one(released(claimed.lease)))
    assert _failure_of(handle) == (
        f"job {handle.id} ended cancelled while running (attempt 1 of 3); its last error: "
        "Cancelled: cancelled by request while running; its worker stopped it"
    )


def test_a_job_cancelled_while_queued_for_a_retry_says_how_its_attempt_ended(
    client: taskq.Client, store: Store, queue: str
) -> None:
    handle = client.submit("m:f", queue=queue, unchecked=True, max_attempts=3)
    _fail_once(store, queue, "bad input")
    handle.cancel()
    assert _failure_of(handle) == (
        f"job {handle.id} ended cancelled before attempt 2 ran; "
        "attempt 1 failed (ValueError: bad input)"
    )
