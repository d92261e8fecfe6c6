"""How a batched report resolves an unknown outcome, step by step through its plan."""

from __future__ import annotations

import json

import pytest

from taskq import errors
from taskq.broker.ops import queries
from taskq.broker.ops.leases import Report, ReportKind, job_report
from taskq.broker.ops.plan import Read, Write
from taskq.broker.records import AttemptReport, Fenced, Lease
from taskq.broker.stores.store import StatementResult

DONE = Lease(1, "t1")
STILL_RUNNING = Lease(2, "t2")
TAKEN = Lease(3, "t3")


def _report(lease: Lease) -> Report:
    return Report(lease, ReportKind.COMPLETE, AttemptReport("succeeded"), result=lease.job_id)


def test_an_unknown_outcome_is_resolved_job_by_job() -> None:
    plan = job_report([_report(DONE), _report(STILL_RUNNING), _report(TAKEN)], now=100.0)
    first = next(plan)
    assert isinstance(first, Write)
    assert not first.idempotent
    check = plan.throw(errors.OutcomeUnknown("leadership lost while committing log"))
    assert isinstance(check, Read)
    retry = plan.send(
        [
            {"id": 1, "state": "succeeded", "lease_token": "t1"},
            {"id": 2, "state": "running", "lease_token": "t2"},
            {"id": 3, "state": "running", "lease_token": "someone else"},
        ]
    )
    # Only the report that certainly did not land is sent again.
    assert isinstance(retry, Write)
    # The clock, the attempt's end, the job's, then the release of jobs waiting on it.
    assert len(retry.statements) == 1 + 2 + 1
    with pytest.raises(StopIteration) as done:
        plan.send(
            [
                StatementResult(),
                StatementResult(),
                StatementResult(rows=[{"id": 2, "lease_token": "t2"}]),
                StatementResult(),
            ]
        )
    assert done.value.value == [Fenced.ACCEPTED, Fenced.ACCEPTED, Fenced.LEASE_LOST]


def test_a_report_that_never_resolves_is_an_error() -> None:
    plan = job_report([_report(STILL_RUNNING)], now=100.0)
    next(plan)
    running = [{"id": 2, "state": "running", "lease_token": "t2"}]
    for _ in range(2):
        plan.throw(errors.OutcomeUnknown("lost"))
        plan.send(running)
    plan.throw(errors.OutcomeUnknown("lost"))
    with pytest.raises(errors.OutcomeUnknown, match="could not be confirmed"):
        plan.send(running)


def test_a_report_sends_only_the_fields_it_has_and_its_times_to_the_microsecond() -> None:
    # Every node of a cluster parses and logs these rows: a null field is left
    # out (``->>`` reads NULL either way), and a duration keeps no float noise.
    attempt = AttemptReport(
        "succeeded", peak_rss_bytes=4096, cpu_seconds=0.0005840000000000012, ran_seconds=0.25
    )
    report = Report(DONE, ReportKind.COMPLETE, attempt, result="done")
    write = next(job_report([report], now=100.0))
    assert isinstance(write, Write)
    attempts, jobs = (
        json.loads(str(statement.params["reports"]))
        for statement in write.statements
        if isinstance(statement.params, dict) and "reports" in statement.params
    )
    assert attempts == [
        {
            "job_id": 1,
            "lease_token": "t1",
            "ran": 0.25,
            "outcome": "succeeded",
            "peak_rss_bytes": 4096,
            "cpu_seconds": 0.000584,
        }
    ]
    assert jobs == [{"job_id": 1, "lease_token": "t1", "result": '"done"'}]


def _settling(write: Write) -> list[str]:
    names = {queries.query(name): name for name in ("job_cascade_cancel", "job_release_ready")}
    return [names[statement.sql] for statement in write.statements if statement.sql in names]


@pytest.mark.parametrize(
    ("kinds", "settling"),
    [
        # Successes doom no waiting job: the write only releases.
        ([ReportKind.COMPLETE, ReportKind.COMPLETE], ["job_release_ready"]),
        # A failure, or a release that may end cancelled, may doom one: the cascade goes first.
        ([ReportKind.COMPLETE, ReportKind.FAIL], ["job_cascade_cancel", "job_release_ready"]),
        ([ReportKind.RELEASE], ["job_cascade_cancel", "job_release_ready"]),
    ],
)
def test_a_report_write_cascades_only_when_an_end_may_doom_a_waiting_job(
    kinds: list[ReportKind], settling: list[str]
) -> None:
    reports = [
        Report(Lease(index, f"t{index}"), kind, AttemptReport("succeeded"), result=index)
        for index, kind in enumerate(kinds, start=1)
    ]
    write = next(job_report(reports, now=100.0))
    assert isinstance(write, Write)
    assert _settling(write) == settling
    # The release is the write's last statement: its rows say which queues it freed.
    assert write.statements[-1].sql == queries.query("job_release_ready")
