"""Acknowledging finished jobs in batches: one request for what finished within a few ms.

While the worker holds jobs claimed ahead, a batch waits longer: until those
jobs would last only one more round trip (see ``taskq.worker.prefetch``).
A report that may free other jobs (see ``Completer``: the last of the
worker's jobs with children, or a spawn) waits for no company: its batch
goes at once, beside the batch in flight if there is one, since every ms it
waits is a ms the jobs it frees wait too.

Each finished job's report is handed over with a future for its own verdict;
the batcher sends what has gathered as one fenced ``job_report``. A store outage
is ridden out with backoff for as long as it lasts: a report is fenced by its
lease token, which only maintenance's requeue of an expired lease changes, so
a result sent after an outage longer than the lease still lands if it comes
before the requeue, and is refused (``LEASE_LOST``) after it. Only a worker
that stops gives its unsent reports up (its jobs go back to their queue by
lease expiry, so nothing is lost).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import msgspec

from taskq import errors
from taskq.broker.ops.leases import Report
from taskq.broker.records import Fenced

Send = Callable[[list[Report]], Awaitable[list[Fenced]]]


class _Pending(msgspec.Struct):
    report: Report
    verdict: asyncio.Future[Fenced]
    urgent: bool


class AckBatcher:
    """Gathers reports for up to ``max_delay`` seconds and sends them together.

    ``still_running`` says how many of the worker's jobs may yet report; once
    none may, the batch goes at once, since waiting longer gathers nothing
    (jobs claimed together tend to finish together, and then wait for this).
    ``slack`` says, while the worker claims jobs ahead, how long the jobs it
    holds keep its slots busy beyond one round trip (None otherwise): the
    batch waits that long, up to ``max_hold``, for more reports to join, and
    goes at once when it runs out, so that the claim riding with it refills
    the slots in time. ``linger`` says how much longer than ``max_delay``
    (up to ``max_hold``) a batch may wait for the reports of the jobs still
    held: once the queues are drained, one round trip, which a batch split
    in two would cost the last report (see ``Prefetch.linger``). The batch
    still goes at once when no held job is left to report.
    """

    def __init__(
        self,
        send: Send,
        *,
        max_delay: float = 0.005,
        max_hold: float = 0.05,
        max_batch: int = 256,
        on_outage: Callable[[errors.StoreError], None] | None = None,
        still_running: Callable[[], int] = lambda: 1,
        slack: Callable[[], float | None] = lambda: None,
        linger: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._send = send
        self._max_delay = max_delay
        self._max_hold = max_hold
        self._max_batch = max_batch
        self._on_outage = on_outage
        self._still_running = still_running
        self._slack = slack
        self._linger = linger
        self._queue: list[_Pending] = []
        self._wake = anyio.Event()
        # Batches being sent; whether one of them is an urgent one sent beside the
        # others (one at most: in an outage each would retry on its own); and
        # while ``run`` runs, where such a batch is sent.
        self._in_flight = 0
        self._beside_in_flight = False
        # Urgent reports in the queue: counted, as this is asked on every submit.
        self._urgent_waiting = 0
        self._sends: anyio.abc.TaskGroup | None = None
        # Set once the worker stops: an outage's unsent reports are given up then.
        self._stop = anyio.Event()
        self.first_answered = anyio.Event()
        """Set once the store has answered a batch: the worker's first report is written."""

    def _batch_is_ready(self) -> bool:
        waiting = len(self._queue)
        if waiting >= self._max_batch or self._still_running() <= 0:
            return True
        if self._urgent_waiting:
            return True
        slack = self._slack()
        return slack is not None and slack <= 0

    def has_waiting(self) -> bool:
        """Whether reports wait to be sent.

        They go in the next batch: within ``max_delay``, or once the batch in
        flight is answered.
        """
        return bool(self._queue)

    def submit(self, report: Report, *, urgent: bool = False) -> asyncio.Future[Fenced]:
        """Queue ``report``; the future gets the store's verdict on it.

        ``urgent``: the report may free other jobs, and goes at once with
        whatever has gathered, even while another batch is in flight.
        """
        # A bare future, not an anyio Event: it is one per job, and it is cheaper.
        pending = _Pending(report, asyncio.get_running_loop().create_future(), urgent)
        self._queue.append(pending)
        self._urgent_waiting += urgent
        if urgent and self._in_flight and not self._beside_in_flight and self._sends is not None:
            # Reports are fenced one by one and each claim keeps its own slots
            # (``Slots.promised``), so two batches in flight are as safe as one.
            self._beside_in_flight = True
            self._sends.start_soon(self._send_beside, self._take_batch())
        elif len(self._queue) == 1 or self._batch_is_ready():
            self._wake.set()
        return pending.verdict

    async def run(self, stop: anyio.Event) -> None:
        """Send batches until ``stop`` is set and nothing is left to send."""
        self._stop = stop
        async with anyio.create_task_group() as sends:
            self._sends = sends
            # The stop wakes an idle batcher as a report does: an idle worker's
            # loop then sleeps until one of them comes, not a timer's tick.
            sends.start_soon(self._wake_on_stop, stop)
            try:
                await self._run(stop)
            finally:
                self._sends = None

    async def _wake_on_stop(self, stop: anyio.Event) -> None:
        await stop.wait()
        self._wake.set()

    async def _run(self, stop: anyio.Event) -> None:
        while True:
            if not self._queue:
                # No await between this check and the wait's new event: a stop
                # set after it sets that event.
                if stop.is_set():
                    return
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            if not self._batch_is_ready():
                # Let the reports of jobs finishing at about the same time join;
                # while the slots have jobs claimed ahead, those of the next ones too.
                slack = self._slack()
                if slack is None:
                    wait = self._max_delay + min(self._linger(), self._max_hold)
                else:
                    wait = min(slack, self._max_hold)
                self._wake = anyio.Event()
                with anyio.move_on_after(wait):
                    await self._wake.wait()
            if self._queue:  # an urgent report may have taken them while this waited
                await self._send_batch(self._take_batch())

    def _take_batch(self) -> list[_Pending]:
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        # What is left past max_batch (rarely anything): counted again.
        self._urgent_waiting = sum(pending.urgent for pending in self._queue)
        return batch

    async def _send_beside(self, batch: list[_Pending]) -> None:
        try:
            await self._send_batch(batch)
        finally:
            self._beside_in_flight = False

    async def _send_batch(self, batch: list[_Pending]) -> None:
        self._in_flight += 1
        try:
            verdicts = await self._send_until_known([pending.report for pending in batch])
        finally:
            self._in_flight -= 1
        self.first_answered.set()
        for pending, verdict in zip(batch, verdicts, strict=True):
            if not pending.verdict.done():  # done: its job's task was cancelled
                pending.verdict.set_result(verdict)

    async def _send_until_known(self, reports: list[Report]) -> list[Fenced]:
        delay = 0.05
        while True:
            try:
                return await self._send(reports)
            except errors.StoreError as exc:
                if self._on_outage is not None:
                    self._on_outage(exc)
            with anyio.move_on_after(delay):
                await self._stop.wait()
            if self._stop.is_set():
                # The worker stops (its grace spent) with the store still away.
                return [Fenced.LEASE_LOST] * len(reports)
            delay = min(delay * 2, 2.0)
