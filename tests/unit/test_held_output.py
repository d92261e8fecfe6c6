"""A running job's output held by its worker: bounded, cut on characters, and flushed in batches."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from taskq import errors
from taskq.broker.ops.output import MOST_CHUNK_BYTES, AttemptOutput
from taskq.broker.ops.plan import Op, Write
from taskq.broker.records import ClaimedJob, Lease, PayloadKind
from taskq.worker.events import EventLog
from taskq.worker.held_output import HeldOutput
from taskq.worker.output_flusher import HELD_BYTES_PER_JOB, OutputFlusher
from taskq.worker.prefetch import Prefetch
from taskq.worker.running import RunningJob
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage

LEASE = Lease(7, "token")


def _joined(output: AttemptOutput | None) -> str:
    assert output is not None
    for before, after in zip(output.chunks, output.chunks[1:], strict=False):
        assert before.end == after.start
    return "".join(chunk.text for chunk in output.chunks)


def test_output_is_cut_into_chunks_at_their_positions() -> None:
    held = HeldOutput(LEASE, keep_bytes=1000, held_bytes=1 << 20)
    held.feed(b"one\n")
    held.feed(b"x" * (MOST_CHUNK_BYTES + 10))
    output = held.take()
    assert output is not None
    assert [(chunk.start, chunk.size) for chunk in output.chunks] == [
        (0, MOST_CHUNK_BYTES),
        (MOST_CHUNK_BYTES, 14),
    ]
    assert output.keep_bytes == 1000
    again = held.take()
    assert again is not None
    assert again.chunks == output.chunks  # held until the store has it
    held.stored(output)
    assert held.take() is None


def test_only_the_first_chunks_taken_say_they_are_the_first_write() -> None:
    held = HeldOutput(LEASE, keep_bytes=1000, held_bytes=1000)
    held.feed(b"one\n")
    first = held.take()
    assert first is not None
    assert first.first_write
    # Taken again (the write failed, or its answer was lost): perhaps stored already.
    again = held.take(final=True)
    assert again is not None
    assert not again.first_write
    held.stored(again)
    held.feed(b"two\n")
    later = held.take(final=True)
    assert later is not None
    assert not later.first_write


def test_a_character_cut_by_a_read_waits_for_its_end() -> None:
    held = HeldOutput(LEASE, keep_bytes=1000, held_bytes=1000)
    encoded = "é✓\n".encode()
    held.feed(encoded[:3])  # é and the first byte of ✓
    first = held.take()
    assert first is not None
    assert _joined(first) == "é"
    held.stored(first)
    held.feed(encoded[3:])
    second = held.take()
    assert _joined(second) == "✓\n"
    assert second is not None
    held.stored(second)
    held.feed(b"\xe2")
    assert held.take() is None
    assert _joined(held.take(final=True)) == "\ufffd"  # the job ended: sent as it is


def test_a_fast_printer_has_its_oldest_output_dropped() -> None:
    held = HeldOutput(LEASE, keep_bytes=1 << 20, held_bytes=100)
    for number in range(1000):
        held.feed(b"%09d\n" % number)
    output = held.take()
    assert held.written == 10_000
    assert _joined(output) == "".join(f"{n:09d}\n" for n in range(990, 1000))
    assert output is not None
    assert output.chunks[0].start == 9_900
    held.feed(b"y" * 500)  # one piece larger than the bound
    assert _joined(held.take()) == "y" * 100


def _running(job_id: int) -> RunningJob:
    job = ClaimedJob(Lease(job_id, f"t{job_id}"), PayloadKind.CALL, {}, "q", 1, 1, None, {}, 0.0)
    return RunningJob(job, renewed_at=time.monotonic())


class _Store:
    """Counts the writes of output, and can fail them."""

    def __init__(self) -> None:
        self.writes: list[list[str]] = []
        self.failing = False

    async def run(self, op: Op[Any]) -> Any:
        step = next(op)
        assert isinstance(step, Write)
        if self.failing:
            raise errors.StoreUnavailable("no leader")
        self.writes.append([statement.sql.split()[0] for statement in step.statements])
        return None


async def _print_for(collect: Any, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        collect(b"x" * 10_000)
        await anyio.sleep(0.001)


def test_printing_jobs_cost_one_write_an_interval_and_quiet_ones_none() -> None:
    store = _Store()
    slots = Slots(2, Prefetch(slots=2, most=0))
    printers = [_running(1), _running(2)]
    for running in printers:
        slots.held[running.job.lease.job_id] = running
    flusher = OutputFlusher(
        store.run, slots, StoreOutage(EventLog(), "w"), keep_bytes=1 << 20, interval=0.2
    )

    async def main() -> float:
        stopped = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(flusher.run, stopped)
            started = time.monotonic()
            async with anyio.create_task_group() as printing:
                for running in printers:
                    printing.start_soon(_print_for, flusher.collector(running), 1.0)
            printed = time.monotonic() - started
            writes = len(store.writes)
            await anyio.sleep(0.5)  # quiet now: no more writes after the last
            assert len(store.writes) <= writes + 1
            stopped.set()
        return printed

    printed = anyio.run(main)
    # Both jobs' output in each write; at most one write an interval (and one at the start).
    assert 2 <= len(store.writes) <= printed / 0.2 + 2
    for running in printers:
        assert running.output is not None
        assert running.output.written >= HELD_BYTES_PER_JOB


def test_a_failed_write_keeps_the_output_for_the_next() -> None:
    store = _Store()
    slots = Slots(1, Prefetch(slots=1, most=0))
    running = _running(1)
    slots.held[1] = running
    flusher = OutputFlusher(store.run, slots, StoreOutage(EventLog(), "w"), keep_bytes=100)
    flusher.collector(running)(b"kept\n")
    store.failing = True
    anyio.run(flusher.flush)
    store.failing = False
    anyio.run(flusher.flush)
    assert len(store.writes) == 1
    assert running.output is not None
    assert running.output.take() is None  # stored now


@pytest.mark.parametrize("reporting", [True, False])
def test_a_job_being_reported_sends_its_output_with_the_report(reporting: bool) -> None:
    store = _Store()
    slots = Slots(1, Prefetch(slots=1, most=0))
    running = _running(1)
    running.reporting = reporting
    slots.held[1] = running
    flusher = OutputFlusher(store.run, slots, StoreOutage(EventLog(), "w"), keep_bytes=100)
    flusher.collector(running)(b"last words\n")
    anyio.run(flusher.flush)
    assert len(store.writes) == (0 if reporting else 1)
    unsent = running.unsent_output()
    if reporting:
        assert _joined(unsent) == "last words\n"
    else:
        assert unsent is None
