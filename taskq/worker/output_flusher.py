"""Sending the output of every job a worker holds to the store: one write an interval, at most.

A job's output is held as it is read (``HeldOutput``). The first piece
after a quiet spell wakes the flusher, which sends what every held job wrote
in one write, then waits out the interval before the next: a worker whose
jobs print costs the store at most one write per interval, whatever the
number of jobs or lines, and one whose jobs are quiet costs none. A job's
last output goes with its report instead (``RunningJob.unsent_output``).

A write that fails (the store is away) leaves the output held, bounded, for
the next; the failure is the outage's to tell, as any other loop's. The
heartbeat is a write of its own: output never holds a lease back.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from taskq import errors
from taskq.broker.ops.output import output_append
from taskq.worker.held_output import HeldOutput
from taskq.worker.running import RunningJob
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import Run
from taskq.worker.waiting import first_of

INTERVAL_SECONDS = 0.5
"""The least time between two writes of output."""

HELD_BYTES_PER_JOB = 256 * 1024
"""The most output held for a job between writes: what one write sends of it, at most.

A job printing faster than this each interval has its older output dropped,
and the store is told how much: 512 KiB a second per job at most."""


class OutputFlusher:
    """Holds the output of a worker's running jobs and writes it to the store in batches."""

    def __init__(
        self,
        run: Run,
        slots: Slots,
        outage: StoreOutage,
        *,
        keep_bytes: int,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        """``keep_bytes``: the most output the store keeps of an attempt (the oldest goes)."""
        self._run = run
        self._slots = slots
        self._outage = outage
        self._keep_bytes = keep_bytes
        self._interval = interval
        self._due = anyio.Event()

    def collector(self, running: RunningJob) -> Callable[[bytes], None]:
        """What the job's sandbox calls with each piece of its output."""

        def collect(data: bytes) -> None:
            held = running.output
            if held is None:
                # Held only once the job prints: a quiet job costs nothing here.
                held = running.output = HeldOutput(
                    running.job.lease, keep_bytes=self._keep_bytes, held_bytes=HELD_BYTES_PER_JOB
                )
            held.feed(data)
            if not self._due.is_set():
                self._due.set()

        return collect

    async def run(self, stopped: anyio.Event) -> None:
        """Write the held output whenever some came, an interval apart, until ``stopped``."""
        while not stopped.is_set():
            await first_of(stopped, self._due)
            if stopped.is_set():
                return
            self._due = anyio.Event()
            await self.flush()
            with anyio.move_on_after(self._interval):
                await stopped.wait()

    async def flush(self) -> None:
        """Write what every held job wrote and the store does not have, in one write."""
        taken = [
            (held, output)
            for running in list(self._slots.held.values())
            # A job being reported sends the rest of its output with its report.
            if (held := running.output) is not None and not running.reporting
            if (output := held.take()) is not None
        ]
        if not taken:
            return
        try:
            await self._run(output_append([output for _, output in taken]))
        except errors.StoreError as exc:
            self._outage.failed(exc)
            self._due.set()  # held still: sent with the next write
            return
        for held, output in taken:
            held.stored(output)
