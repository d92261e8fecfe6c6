"""The worker's heartbeat: every lease it holds renewed in one statement, every H seconds.

Each beat also reports the worker's busy and total slots, renews the
maintenance leader's lease when this worker holds it, and stops any job
whose lease the store says is gone. After each beat, jobs whose leases went
unrenewed too long are stopped, and the shared lease deadline (which the
keepers enforce should the worker freeze) follows the oldest renewal left.
"""

from __future__ import annotations

import time

import anyio
import msgspec

from taskq import errors
from taskq.broker.ops.heartbeats import job_heartbeat
from taskq.broker.ops.maintenance import Maintainer
from taskq.worker.events import EventLog
from taskq.worker.running import StopReason, note_renewals, stop_expired
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import Run
from taskq.worker.waiting import first_of


class LeaseHolder(msgspec.Struct, frozen=True):
    """A worker as the holder of its jobs' leases, which its claims take and its heartbeat renews.

    Who holds them (``worker_id``), in which store (``run``), for which jobs
    (``slots``), until when the keepers let them run (``deadline``), and the
    settings that time them.
    """

    run: Run
    worker_id: str
    settings: WorkerSettings
    slots: Slots
    deadline: LeaseDeadline


class Heartbeat:
    """Renews a worker's leases until it stops; ``beat_soon`` sends the next beat at once."""

    def __init__(
        self,
        holder: LeaseHolder,
        *,
        outage: StoreOutage,
        events: EventLog,
        maintainer: Maintainer | None,
        draining: anyio.Event,
    ) -> None:
        """``maintainer``: the worker's maintenance services, whose leader lease rides
        with each beat (None when the worker runs none). ``draining``: set once the
        worker drains; each beat after says so, so that a worker marked lost meanwhile
        comes back draining, not active."""
        self._holder = holder
        self._outage = outage
        self._events = events
        self._maintainer = maintainer
        self._draining = draining
        self._beat_now = anyio.Event()

    def beat_soon(self) -> None:
        """Send the next beat now: the slot count changed, and the store should know."""
        self._beat_now.set()

    async def run(self, stopped: anyio.Event) -> None:
        while not stopped.is_set():
            await self._beat()
            self.check_leases()
            with anyio.move_on_after(self._holder.settings.heartbeat_seconds):
                await first_of(stopped, self._beat_now)
            if self._beat_now.is_set():
                self._beat_now = anyio.Event()

    async def _beat(self) -> None:
        held = self._holder.slots.held
        leases = [running.job.lease for running in held.values()]
        maintainer = self._maintainer
        renew = maintainer.heartbeat_renewal() if maintainer is not None else None
        sent_at = time.monotonic()
        try:
            beat = await self._holder.run(
                job_heartbeat(
                    self._holder.worker_id,
                    leases,
                    lease_seconds=self._holder.settings.lease_seconds,
                    # Jobs claimed ahead hold leases but no slot yet, as do
                    # those waiting in a pool child behind another.
                    busy=self._holder.slots.busy(),
                    slots=self._holder.slots.count,
                    draining=self._draining.is_set(),
                    renew=renew,
                )
            )
        except errors.StoreError as exc:
            self._outage.failed(exc)
            return
        self._outage.written()
        if maintainer is not None and beat.leader_held is not None:
            maintainer.heartbeat_renewed(beat.leader_held, sent_at=sent_at)
        note_renewals(held, leases, beat.lost, sent_at)
        for lease in beat.lost:
            running = held.get(lease.job_id)
            # A job reported since this heartbeat was sent has left
            # 'running' in the store: that is no lost lease.
            if running is not None and running.job.lease == lease and not running.reporting:
                if lease in beat.cancelled:
                    self._events.emit("cancel_requested", job=lease.job_id)
                    running.stop(StopReason.CANCELLED)
                else:
                    self._events.emit("lease_lost", job=lease.job_id)
                    running.stop(StopReason.LEASE_GONE)

    def check_leases(self) -> None:
        """Stop the jobs whose leases were not renewed in time; set the deadline by the rest."""
        lasts = self._holder.settings.lease_seconds - self._holder.settings.lease_margin_seconds
        self._holder.deadline.held_since(
            stop_expired(self._holder.slots.held, lasts, time.monotonic())
        )
