"""Batching of reports: when a batch goes, and how long it may wait for more."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from taskq import errors
from taskq.broker.ops.leases import Report, ReportKind
from taskq.broker.records import AttemptReport, Fenced, Lease
from taskq.worker.acks import AckBatcher

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def running(batcher: AckBatcher) -> AsyncIterator[None]:
    """``batcher`` sending while in the block, which has 5 s; it stops when the block ends."""
    stop = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(batcher.run, stop)
            yield
            stop.set()


def report(job_id: int) -> Report:
    return Report(Lease(job_id, f"t{job_id}"), ReportKind.COMPLETE, AttemptReport("succeeded"))


class Sent:
    """The batches a batcher sent, and an event for each one."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.changed = anyio.Event()

    async def send(self, reports: list[Report]) -> list[Fenced]:
        self.batches.append([r.lease.job_id for r in reports])
        self.changed.set()
        self.changed = anyio.Event()
        return [Fenced.ACCEPTED] * len(reports)


async def test_reports_wait_while_the_jobs_held_outlast_a_round_trip() -> None:
    sent = Sent()
    slack: list[float | None] = [10.0]
    batcher = AckBatcher(sent.send, max_hold=10.0, slack=lambda: slack[0])
    async with running(batcher):
        verdicts = [batcher.submit(report(job_id)) for job_id in (1, 2)]
        # Held: the slots have work for longer than a round trip.
        for _ in range(20):
            await anyio.sleep(0)
        assert sent.batches == []
        # The jobs held will last one round trip more: the next report sends all.
        slack[0] = 0.0
        changed = sent.changed
        verdicts.append(batcher.submit(report(3)))
        await changed.wait()
        assert sent.batches == [[1, 2, 3]]
        assert [await v for v in verdicts] == [Fenced.ACCEPTED] * 3


async def test_without_jobs_claimed_ahead_a_batch_waits_only_the_short_delay() -> None:
    sent = Sent()
    batcher = AckBatcher(sent.send, max_delay=0.001, max_hold=10.0)
    async with running(batcher):
        changed = sent.changed
        verdict = batcher.submit(report(1))
        await changed.wait()
        assert sent.batches == [[1]]
        assert await verdict is Fenced.ACCEPTED


async def test_once_drained_a_batch_lingers_for_the_held_jobs_and_goes_with_the_last() -> None:
    sent = Sent()
    held = [2]
    batcher = AckBatcher(
        sent.send,
        max_delay=0.001,
        max_hold=10.0,
        still_running=lambda: held[0],
        linger=lambda: 10.0,
    )
    async with running(batcher):
        verdicts = [batcher.submit(report(1))]
        # Fifty times the short delay: without the linger, report 1 would have gone alone.
        await anyio.sleep(0.05)
        assert sent.batches == []
        held[0] = 0  # the last held job ends: its report sends the batch at once
        changed = sent.changed
        verdicts.append(batcher.submit(report(2)))
        await changed.wait()
        assert sent.batches == [[1, 2]]
        assert [await v for v in verdicts] == [Fenced.ACCEPTED] * 2


async def test_a_report_that_frees_other_jobs_goes_at_once_with_those_gathered() -> None:
    sent = Sent()
    # Held for 10 s as plain reports would be, with jobs claimed ahead.
    batcher = AckBatcher(sent.send, max_hold=10.0, slack=lambda: 10.0)
    async with running(batcher):
        verdicts = [batcher.submit(report(job_id)) for job_id in (1, 2)]
        for _ in range(20):
            await anyio.sleep(0)
        assert sent.batches == []  # plain reports still wait for company
        changed = sent.changed
        verdicts.append(batcher.submit(report(3), urgent=True))
        await changed.wait()
        assert sent.batches == [[1, 2, 3]]
        assert [await v for v in verdicts] == [Fenced.ACCEPTED] * 3
        # Plain reports after it wait as before.
        batcher.submit(report(4))
        for _ in range(20):
            await anyio.sleep(0)
        assert sent.batches == [[1, 2, 3]]
        changed = sent.changed
        batcher.submit(report(5), urgent=True)
        await changed.wait()
        assert sent.batches == [[1, 2, 3], [4, 5]]


async def test_an_urgent_report_goes_beside_a_batch_in_flight_and_plain_ones_do_not() -> None:
    answer = anyio.Event()
    batches: list[list[int]] = []
    sent_one = anyio.Event()

    async def send(reports: list[Report]) -> list[Fenced]:
        batches.append([r.lease.job_id for r in reports])
        sent_one.set()
        if reports[0].lease.job_id == 1:
            await answer.wait()  # the first batch stays in flight
        return [Fenced.ACCEPTED] * len(reports)

    batcher = AckBatcher(send, max_delay=0.0)
    async with running(batcher):
        first = batcher.submit(report(1))
        await sent_one.wait()
        plain = batcher.submit(report(2))
        for _ in range(20):
            await anyio.sleep(0)
        assert batches == [[1]]  # a plain report waits for the answer in flight
        urgent = batcher.submit(report(3), urgent=True)
        assert await urgent is Fenced.ACCEPTED
        assert batches == [[1], [2, 3]]
        assert await plain is Fenced.ACCEPTED
        assert not first.done()
        answer.set()
        assert await first is Fenced.ACCEPTED


async def test_first_answered_is_set_once_the_store_has_answered_a_batch() -> None:
    answer = anyio.Event()
    sent = Sent()

    async def send(reports: list[Report]) -> list[Fenced]:
        await answer.wait()
        return await sent.send(reports)

    batcher = AckBatcher(send, still_running=lambda: 0)
    async with running(batcher):
        verdict = batcher.submit(report(1))
        await anyio.wait_all_tasks_blocked()
        # Sent, not answered: the worker's first report is not written yet.
        assert not batcher.first_answered.is_set()
        answer.set()
        await batcher.first_answered.wait()
        assert await verdict is Fenced.ACCEPTED


async def test_a_report_is_tried_until_the_store_answers_and_given_up_only_at_stop() -> None:
    # No deadline of its own: fenced by its lease token, a result sent after a
    # long outage still lands unless maintenance requeued the job meanwhile.
    outages: list[errors.StoreError] = []
    down = [3]

    async def send(reports: list[Report]) -> list[Fenced]:
        if down[0]:
            down[0] -= 1
            raise errors.StoreUnavailable("no leader")
        return [Fenced.ACCEPTED] * len(reports)

    batcher = AckBatcher(send, max_delay=0.0, on_outage=outages.append)
    async with running(batcher):
        assert await batcher.submit(report(1)) is Fenced.ACCEPTED
    assert len(outages) == 3
    # An outage that outlasts the worker: given up once it stops, and the batcher ends.
    down[0] = 10**9
    stop = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(batcher.run, stop)
            verdict = batcher.submit(report(2))
            while len(outages) < 5:
                await anyio.sleep(0.01)
            assert not verdict.done()
            stop.set()
    assert verdict.result() is Fenced.LEASE_LOST


async def test_an_idle_batcher_sets_no_timer_and_its_stop_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An idle worker's batcher sleeps until a report or the stop comes: a timer
    # of its own would wake the worker's loop many times a second for nothing.
    loop = asyncio.get_running_loop()
    deadlines: list[object] = []
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        # anyio's cancel scopes (move_on_after, fail_after) set their deadlines so.
        if isinstance(getattr(callback, "__self__", None), anyio.CancelScope):
            deadlines.append(callback.__self__)
        return call_at(when, callback, *args, **kwargs)

    sent = Sent()
    batcher = AckBatcher(sent.send)
    async with running(batcher):
        await anyio.wait_all_tasks_blocked()
        monkeypatch.setattr(loop, "call_at", counted)
        # Longer than any idle tick the batcher could have: its timer would fire first.
        await anyio.sleep(0.2)
        assert deadlines == []
        monkeypatch.undo()
        verdict = batcher.submit(report(1))
        assert await verdict is Fenced.ACCEPTED
    assert sent.batches == [[1]]
