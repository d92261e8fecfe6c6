"""The completer alone: what it reports for a finished job, and what it does with the verdict."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from taskq.broker.ops.leases import Report, ReportKind
from taskq.broker.records import ClaimedJob, Fenced, Lease, PayloadKind
from taskq.job_context import JobUpdate
from taskq.worker.acks import AckBatcher
from taskq.worker.completer import Completer
from taskq.worker.events import EventLog
from taskq.worker.prefetch import Prefetch
from taskq.worker.running import STOPPED_WORDS, RunningJob, StopReason
from taskq.worker.sandbox.outcome import Outcome, Status, error_info, stopped_before_start
from taskq.worker.slots import Slots

pytestmark = pytest.mark.anyio


class Store:
    """Answers each batch of reports with the verdict set for its job (accepted otherwise)."""

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self.verdicts: dict[int, Fenced] = {}

    async def send(self, reports: list[Report]) -> list[Fenced]:
        self.reports.extend(reports)
        return [self.verdicts.get(r.lease.job_id, Fenced.ACCEPTED) for r in reports]


class Reporting:
    """A completer over a running batcher, and what came of its reports."""

    def __init__(self, batcher: AckBatcher, store: Store) -> None:
        self.store = store
        self.stream = io.StringIO()
        self.events = EventLog(self.stream, format="json")
        self.slots = Slots(1, Prefetch(slots=1, most=0))
        self.completer = Completer(acks=batcher, slots=self.slots, events=self.events)

    def held(self, job_id: int) -> RunningJob:
        job = ClaimedJob(Lease(job_id, "t"), PayloadKind.CALL, {}, "default", 1, 3, None, {}, 0.0)
        running = RunningJob(job, renewed_at=0.0)
        self.slots.hold(running)
        return running

    async def answered(self, running: RunningJob, outcome: Outcome) -> dict[str, Any]:
        """Report ``running``; the event line once the store has answered."""
        changed = self.slots.next_change()
        self.completer.report(running, outcome)
        await changed.wait()
        self.events.flush()
        line: dict[str, Any] = json.loads(self.stream.getvalue().splitlines()[-1])
        return line


@pytest.fixture
async def reporting() -> AsyncIterator[Reporting]:
    store = Store()
    batcher = AckBatcher(store.send)
    stop = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(batcher.run, stop)
            yield Reporting(batcher, store)
            stop.set()


async def test_a_finished_job_is_completed_and_freed_once_the_store_accepts(
    reporting: Reporting,
) -> None:
    running = reporting.held(7)
    running.progress = JobUpdate(1.0, "done")
    outcome = Outcome(Status.SUCCEEDED, result_json="42", wall_seconds=0.1)
    line = await reporting.answered(running, outcome)
    (report,) = reporting.store.reports
    assert (report.kind, report.result_json, report.progress_message) == (
        ReportKind.COMPLETE,
        "42",
        "done",
    )
    assert running.reporting
    assert reporting.slots.held == {}
    assert (line["event"], line["job"], line["status"], line["stopped"]) == (
        "job_finished",
        7,
        "succeeded",
        "",
    )


async def test_the_seconds_told_are_the_jobs_own_run_not_the_workers_hold(
    reporting: Reporting,
) -> None:
    # Claimed long ago (a report held through a store outage, say): the line
    # still says how long the job ran, and apart from it how long it was held.
    running = reporting.held(11)
    running.started -= 100.0
    outcome = Outcome(Status.SUCCEEDED, result_json="1", wall_seconds=0.25)
    line = await reporting.answered(running, outcome)
    assert line["seconds"] == 0.25
    assert line["held_seconds"] >= 100.0


async def test_a_report_the_store_refuses_is_dropped(reporting: Reporting) -> None:
    reporting.store.verdicts[8] = Fenced.LEASE_LOST
    running = reporting.held(8)
    failed = Outcome(Status.ERROR, error=error_info("ValueError", "bad input"))
    line = await reporting.answered(running, failed)
    assert reporting.store.reports[0].kind is ReportKind.FAIL
    assert (line["event"], line["status"], line["error"]) == ("job_dropped", "error", "bad input")
    assert reporting.slots.held == {}


@pytest.mark.parametrize("reason", [StopReason.DRAIN, StopReason.HAND_BACK])
async def test_a_job_the_worker_stopped_is_released_unused(
    reporting: Reporting, reason: str
) -> None:
    running = reporting.held(9)
    running.stop(reason)
    line = await reporting.answered(running, stopped_before_start())
    (report,) = reporting.store.reports
    assert (report.kind, report.attempt.outcome) == (ReportKind.RELEASE, "released")
    assert (line["event"], line["stopped"]) == ("job_finished", reason)


KILLED = "stopped by the worker (cancelled, drained or handed back); killed"
"""What the sandbox says of any job the worker had it kill, whatever the worker's reason."""


async def test_a_drained_job_says_it_was_handed_back_by_a_draining_worker(
    reporting: Reporting,
) -> None:
    running = reporting.held(12)
    running.stop(StopReason.DRAIN)
    killed = Outcome(Status.CANCELLED, error=error_info("Cancelled", KILLED), wall_seconds=2.0)
    line = await reporting.answered(running, killed)
    assert (line["status"], line["stopped"]) == ("released", "drain")
    assert line["error"] == "handed back: the worker is draining; killed"
    assert set(line) == {
        "ts",
        "event",
        "job",
        "status",
        "stopped",
        "seconds",
        "held_seconds",
        "peak_rss_mib",
        "error",
    }


@pytest.mark.parametrize(
    "reason",
    [
        StopReason.LEASE_GONE,
        StopReason.CANCELLED,
        StopReason.DRAIN,
        StopReason.HAND_BACK,
        StopReason.SERVED_ELSEWHERE,
    ],
)
async def test_a_job_the_worker_stopped_says_why_in_one_sentence(
    reporting: Reporting, reason: str
) -> None:
    killed = reporting.held(13)
    killed.stop(reason)
    outcome = Outcome(Status.CANCELLED, error=error_info("Cancelled", KILLED), wall_seconds=2.0)
    said = (await reporting.answered(killed, outcome))["error"]
    assert said == f"{STOPPED_WORDS[reason]}; killed"
    assert ". " not in said
    unstarted = reporting.held(14)
    unstarted.stop(reason)
    before = (await reporting.answered(unstarted, stopped_before_start()))["error"]
    assert before == f"{STOPPED_WORDS[reason]}; it had not started"


async def test_a_job_that_finished_as_it_was_stopped_keeps_its_outcome(
    reporting: Reporting,
) -> None:
    running = reporting.held(10)
    running.stop(StopReason.DRAIN)
    line = await reporting.answered(running, Outcome(Status.SUCCEEDED, result_json="1"))
    assert reporting.store.reports[0].kind is ReportKind.COMPLETE
    assert line["stopped"] == ""


async def test_a_lease_that_expired_hands_the_job_back(reporting: Reporting) -> None:
    running = reporting.held(11)
    line = await reporting.answered(running, Outcome(Status.LEASE_EXPIRED))
    (report,) = reporting.store.reports
    assert (report.kind, report.attempt.outcome) == (ReportKind.RELEASE, "lease_expired")
    assert line["stopped"] == StopReason.LEASE_GONE


class UrgencyRecorder:
    """A batcher that records which reports were marked urgent, and answers none."""

    def __init__(self) -> None:
        self.urgent: dict[int, bool] = {}

    def submit(self, report: Report, *, urgent: bool = False) -> asyncio.Future[Fenced]:
        self.urgent[report.lease.job_id] = urgent
        return asyncio.get_running_loop().create_future()


async def test_only_the_last_report_of_jobs_with_children_the_worker_holds_is_urgent() -> None:
    recorder = UrgencyRecorder()
    slots = Slots(4, Prefetch(slots=4, most=0))
    completer = Completer(acks=recorder, slots=slots, events=EventLog(io.StringIO()))  # type: ignore[arg-type]

    def held(job_id: int, *, has_children: bool) -> RunningJob:
        job = ClaimedJob(
            Lease(job_id, "t"),
            PayloadKind.CALL,
            {},
            "q",
            1,
            3,
            None,
            {},
            0.0,
            has_children=has_children,
        )
        running = RunningJob(job, renewed_at=0.0)
        slots.hold(running)
        return running

    first, second = held(1, has_children=True), held(2, has_children=True)
    plain = held(3, has_children=False)
    done = Outcome(Status.SUCCEEDED, result_json="null")
    # A fan-in's parents all have children; only the last one's report releases it.
    completer.report(first, done)  # another is yet to report: it waits for company
    completer.report(plain, done)  # no children: batched as ever
    completer.report(second, done)  # the worker's last job with children: at once
    assert recorder.urgent == {1: False, 3: False, 2: True}
