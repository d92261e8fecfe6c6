"""What the worker tells the store about a finished attempt."""

from __future__ import annotations

import json
import math

import msgspec
import pytest

from taskq.broker.limits import Limits
from taskq.broker.ops.leases import ReportKind
from taskq.broker.records import ClaimedJob, Lease, PayloadKind
from taskq.job_context import JobUpdate
from taskq.retry import RetryPolicy
from taskq.worker.reports import report_of
from taskq.worker.running import StopReason
from taskq.worker.sandbox.judging import decide_outcome
from taskq.worker.sandbox.outcome import Outcome, Status
from taskq.worker.sandbox.protocol import ChildReport
from taskq.worker.sandbox.supervision import EndReason, Supervised

LEASE = Lease(job_id=7, token="t")
JOB = ClaimedJob(LEASE, PayloadKind.CALL, {}, "default", 2, 5, None, {}, 0.0)


def reported(result_json: str) -> Outcome:
    """The outcome of a pool job whose child sent ``result_json``."""
    report = ChildReport(Status.SUCCEEDED, result_json)
    supervised = Supervised(EndReason.REPORTED, report, None, None, 0, "", 0.1)
    return decide_outcome(supervised, kind="call", limits=Limits())


def test_a_result_is_encoded_once_with_every_digit() -> None:
    result = {"big": 2**70, "text": "é", "fraction": 0.00032199999999998896, "none": None}
    encoded = json.dumps(result, separators=(",", ":"))
    report = report_of(JOB, None, reported(encoded))
    assert report.kind is ReportKind.COMPLETE
    assert report.result_json == encoded
    assert json.loads(report.result_json) == result


@pytest.mark.parametrize("number", [math.nan, math.inf])
def test_a_result_json_cannot_hold_fails_the_job_without_retry(number: float) -> None:
    # Only a child that forged its frame gets such a value past its own encoder.
    report = report_of(JOB, None, reported(json.dumps([number])))
    assert report.kind is ReportKind.FAIL
    assert report.retryable is False
    assert report.error is not None
    assert report.error["type"] == "ResultInvalid"


def failed(**verdict: object) -> Outcome:
    """An attempt whose job raised, with the child's word on retrying it."""
    error = {"type": "ValueError", "message": "no", "traceback": ""}
    return Outcome(Status.ERROR, error=error, **verdict)  # type: ignore[arg-type]


def test_the_jobs_policy_sets_the_delay_of_its_next_attempt() -> None:
    policy = RetryPolicy(base=10.0, factor=3.0, cap=100.0, jitter=0.0)
    job = msgspec.structs.replace(JOB, retry=policy.to_dict())  # its second attempt failed
    report = report_of(job, None, failed(lineage=("ValueError", "Exception")))
    assert (report.retryable, report.retry_delay, report.give_up) == (True, 30.0, False)


def test_retry_on_and_dont_retry_on_choose_by_the_exceptions_classes() -> None:
    only_io = msgspec.structs.replace(JOB, retry=RetryPolicy(retry_on=(OSError,)).to_dict())
    assert not report_of(only_io, None, failed(lineage=("ValueError", "Exception"))).retryable
    assert report_of(only_io, None, failed(lineage=("ConnectionError", "OSError"))).retryable
    not_value = msgspec.structs.replace(
        JOB, retry=RetryPolicy(dont_retry_on=("ValueError",)).to_dict()
    )
    assert not report_of(not_value, None, failed(lineage=("ValueError", "Exception"))).retryable


def test_retry_abort_and_a_permanent_error_speak_for_the_job() -> None:
    again = report_of(JOB, None, failed(lineage=("taskq.retry.Retry",), retry_after=600.0))
    assert (again.retryable, again.retry_delay) == (True, 600.0)
    abort = report_of(JOB, None, failed(lineage=("taskq.retry.Abort",), give_up="abort"))
    assert (abort.retryable, abort.give_up) == (True, True)
    only_io = msgspec.structs.replace(JOB, retry=RetryPolicy(retry_on=(OSError,)).to_dict())
    asked = report_of(only_io, None, failed(lineage=("taskq.retry.Retry", "Exception")))
    assert (asked.retryable, asked.retry_delay is not None) == (True, True)
    aborted = report_of(only_io, None, failed(lineage=("taskq.retry.Abort",), give_up="abort"))
    assert (aborted.retryable, aborted.give_up) == (True, True)  # dead, not failed
    broken = report_of(JOB, None, failed(lineage=("TypeError",), give_up="permanent"))
    assert broken.retryable is False
    assert broken.error is not None
    assert broken.error["gave_up"] == "permanent"


def test_every_kind_of_report_carries_the_jobs_last_progress() -> None:
    said = JobUpdate(0.9, "9 of 10 pages")
    reports = [
        report_of(JOB, None, reported("1"), progress=said),
        report_of(JOB, None, failed(lineage=("ValueError",)), progress=said),
        report_of(JOB, StopReason.DRAIN, Outcome(Status.CANCELLED), progress=said),
    ]
    assert [report.kind for report in reports] == list(ReportKind)
    assert {(report.progress, report.progress_message) for report in reports} == {
        (0.9, "9 of 10 pages")
    }
    assert report_of(JOB, None, reported("1")).progress is None  # none said: none sent


def test_a_job_handed_back_says_why_on_its_attempts_record() -> None:
    why = {"type": "Cancelled", "message": "handed back: the worker is draining; killed"}
    report = report_of(JOB, StopReason.DRAIN, Outcome(Status.CANCELLED, error=why))
    assert report.kind is ReportKind.RELEASE
    assert report.error == {**why, "type": "HandedBack"}
    # Stopped at a user's request, it ends cancelled, and its record says so.
    cancelled = report_of(JOB, StopReason.CANCELLED, Outcome(Status.CANCELLED, error=why))
    assert cancelled.error == why
    # A job that finished as it was being stopped is judged by its own outcome.
    assert report_of(JOB, None, reported("1")).error is None
