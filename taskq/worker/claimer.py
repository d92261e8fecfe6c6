"""The claim loop: when a worker claims jobs on its own rather than with a batch of reports.

While busy, claims ride with the acknowledgements (see ``claim_requests``),
so this loop claims only for slots no batch is about to refill. When idle it
lets a cheap read (``job_claimable``) decide whether a claim is worth a
write, and waits between looks, waking early when the store changes, a slot
frees or the worker drains.
"""

from __future__ import annotations

import time

import anyio

from taskq import errors
from taskq.broker.stores.look_turns import look_turns_of
from taskq.broker.stores.store import Store, tells_of_changes
from taskq.worker.acks import AckBatcher
from taskq.worker.claim_requests import ClaimRequests
from taskq.worker.settings import WorkerSettings
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage

# Jobs tend to come in bursts: for a while after the last one, an idle worker
# that is not woken by every commit looks again sooner. On rqlite, where
# looking is a read every poll and a hint may be lost or its look read a node
# that lacks the job yet, this bounds the pickup latency; a long-idle worker
# polls at the store's own pace.
_BUSY_POLL_SECONDS = 0.01
_BUSY_POLL_WINDOW_SECONDS = 1.0


class Claimer:
    """Claims for free slots until the worker drains."""

    def __init__(
        self,
        store: Store,
        *,
        settings: WorkerSettings,
        slots: Slots,
        claims: ClaimRequests,
        acks: AckBatcher,
        outage: StoreOutage,
        draining: anyio.Event,
    ) -> None:
        self._store = store
        self._settings = settings
        self._slots = slots
        self._claims = claims
        self._acks = acks
        self._outage = outage
        self._draining = draining
        # Asked once: each is an isinstance check against a Protocol, which Python
        # answers by walking the Protocol's members, and an idle worker looks often.
        self._turns = look_turns_of(store)
        self._told_of_changes = tells_of_changes(store)

    async def run(self) -> None:
        """Claim for free slots; while busy, most claims ride along with acknowledgements."""
        idle = min(0.05, self._settings.idle_poll_seconds)
        while not self._draining.is_set():
            free = self._slots.to_claim()
            # Reports waiting to go, or jobs held that outlast a round trip (their
            # reports will go before the slots run dry): that batch claims for
            # these slots, and its answer wakes this loop. A claim of its own
            # would be a write for the few jobs a busy worker's slots free
            # between two batches.
            if free <= 0 or self._acks.has_waiting() or self._held_jobs_outlast_a_round():
                await self._slots.next_change().wait()
                continue
            looked_at = time.monotonic()
            try:
                claimed = 0
                # In turn with the store's other idle workers, where they take turns: the
                # one commit that woke them all is claimed by one, not by each.
                with self._slots.promised(free):
                    claimed = await self._claims.claim_if_claimable(
                        free, looked_at, turns=self._turns
                    )
            except errors.StoreError as exc:
                self._outage.failed(exc)
                await self._pause(idle)
                idle = min(idle * 2, self._settings.idle_poll_seconds)
                continue
            if claimed == free:
                idle = min(0.05, self._settings.idle_poll_seconds)
                continue  # a full batch: there may be more waiting
            if claimed:
                idle = min(0.05, self._settings.idle_poll_seconds)
            interval = poll_interval(
                idle,
                since_claim=time.monotonic() - self._claims.last_claimed,
                told_of_changes=self._told_of_changes,
            )
            # Looks start an interval apart, not an interval after the last claim
            # ended: a claim's write (a Raft round on rqlite) would add to the wait.
            since = time.monotonic() - looked_at
            if since < interval:
                await self._pause(interval - since)
            idle = min(idle * 2, self._settings.idle_poll_seconds)

    def _held_jobs_outlast_a_round(self) -> bool:
        slack = self._slots.held_jobs_slack()
        return slack is not None and slack > 0

    async def _pause(self, seconds: float) -> None:
        """Wait up to ``seconds``; wake early when the store changes, a slot frees or we drain."""
        # In this task, a slot's wake cancelling the wait: an idle worker pauses after every
        # commit anyone makes, and a task started for each pause, and the hop back from it,
        # cost a pickup about 0.2 ms at the median (traced, issue 44).
        with anyio.CancelScope() as pause, self._slots.waking(pause.cancel):
            await self._store.wait_for_change(seconds)


def poll_interval(idle: float, *, since_claim: float, told_of_changes: bool) -> float:
    """How long an idle worker waits before it looks again, unless woken sooner.

    ``idle``, or the busy poll for a while after the last claim (``since_claim``
    seconds ago), but only on a store that does not wake its waiters on every
    commit (``told_of_changes``): where it does (the embedded store), a poll
    would only read what the wake-up brings anyway.
    """
    if told_of_changes or since_claim >= _BUSY_POLL_WINDOW_SECONDS:
        return idle
    return min(idle, _BUSY_POLL_SECONDS)
