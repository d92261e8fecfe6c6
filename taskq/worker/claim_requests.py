"""The requests that claim jobs: alone, or riding with a batch of reports.

A worker claims as many jobs as it has free slots (and, while jobs are
short, a few more: see ``prefetch``), less those promised to a claim in
flight. While busy, most claims go with the acknowledgements of finished
jobs, for the slots those jobs free: one atomic write
(``job_report_and_claim``) where a claim of its own would be a second. The
jobs a claim brings are held (``Slots.hold``) until their reports are answered.

A report that ends every job the worker holds is written from its event loop,
which has nothing else to do meanwhile, on the embedded store: the trip to a
thread and back is two thread switches on the way from a pipeline step's end
to its next step's start (``store_runner.here_runner``).

A report that releases jobs waiting on it, or spawns jobs, leaves work that
this worker's claim may not take. On a cluster, where idle workers hear of
new jobs only by a hint (``taskq.broker.stores.wake_hints``), the worker
sends the workers of those queues the hint a submitting client sends.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import anyio

from taskq.broker.client.wake_sender import WakeSender
from taskq.broker.ops.claims import ClaimRequest, job_backlog, job_claimable_then
from taskq.broker.ops.leases import Report, ReportAnswer, ReportKind, job_report_claim
from taskq.broker.records import Fenced
from taskq.broker.stores.look_turns import NO_TURNS, LookTurns
from taskq.worker.heartbeat import Heartbeat, LeaseHolder
from taskq.worker.running import RunningJob
from taskq.worker.store_runner import Run

PARENTS_SEEN_SECONDS = 300.0
"""How long after a job with parents came a worker's claims still ask for parents' outcomes."""


class ClaimRequests:
    """Claims for a worker's free slots, and holds the jobs that come."""

    def __init__(
        self,
        holder: LeaseHolder,
        *,
        heartbeat: Heartbeat,
        draining: anyio.Event,
        hints: WakeSender | None = None,
        look: Run | None = None,
        here: Run | None = None,
    ) -> None:
        """``hints``: on a cluster, how to tell idle workers of jobs a report left them.

        ``look``: how an idle worker's look is run (``store_runner.look_runner``);
        by default as every other operation. ``here``: how a report that ends
        every job the worker holds is run (``store_runner.here_runner``); by
        default as every other operation.
        """
        self._holder = holder
        self._look = holder.run if look is None else look
        self._here = here
        self._heartbeat = heartbeat
        self._draining = draining
        self._hints = hints
        # Jobs whose reports are in flight with a claim (see ``send_reports``).
        self._leaving_in_flight = 0
        self.last_claimed = float("-inf")
        """When the last job came (monotonic): an idle worker looks again sooner for a while."""
        self._parents_seen = float("-inf")
        """When a job with parents last came (monotonic): see ``_with_parents``."""

    async def send_reports(self, reports: list[Report]) -> list[Fenced]:
        """Acknowledge, and claim in the same request for the slots these reports free."""
        leaving = sum(1 for report in reports if report.lease.job_id in self._holder.slots.held)
        # The jobs of a batch in flight are still held, and their slots already promised
        # to its claim: a batch sent beside it (an urgent one, see ``acks``) counts them
        # once, or it would claim nothing, not even for the job its report releases.
        free = self._holder.slots.to_claim() + leaving + self._leaving_in_flight
        releasing = self._may_release_jobs(reports)
        if releasing:
            # Claims ahead may have promised every slot to a claim sent before
            # this write could release anything: one more, for a job it frees in
            # this worker's queues, saves that job a write (a hint and a claim
            # of its own). Held beyond the slots, it is handed back if none
            # frees in time (``Executor.hand_back_overdue``), as any job claimed ahead.
            free = max(free, 1)
        if self._draining.is_set() or free <= 0:
            run = self._report_runner(reports)
            answer: ReportAnswer = await run(job_report_claim(reports, None))
            await self._hint(answer)
            return answer.fenced
        sent_at = time.monotonic()
        self._leaving_in_flight += leaving
        try:
            with self._holder.slots.promised(free):
                verdicts, _ = await self.report_and_claim(
                    reports, free, sent_at, releasing=releasing
                )
        finally:
            self._leaving_in_flight -= leaving
        self._holder.slots.prefetch.round_took(time.monotonic() - sent_at)
        return verdicts

    def _report_runner(self, reports: list[Report]) -> Run:
        """How the write of ``reports`` runs: from the event loop when they end every job the
        worker holds, as the loop then has nothing else to do; else as every other operation,
        so that no other job's start or end waits behind the write's fsync."""
        if self._here is None:
            return self._holder.run
        ending = {report.lease.job_id for report in reports}
        if any(job_id not in ending for job_id in self._holder.slots.held):
            return self._holder.run
        return self._here

    def _may_release_jobs(self, reports: list[Report]) -> bool:
        """Whether one of ``reports`` may queue other jobs: a spawn, or the end of a job with
        children.

        A job handed back (``RELEASE``) is queued again, not ended: its children go on
        waiting. Counted, its hand-back would claim one job beyond the slots, and the
        one queued job may be the one just handed back, to be handed back again when no
        slot frees for it: a loop of claims and attempts for as long as the slots stay
        busy. (A hand-back that a cancel request ends still releases what runs anyway;
        the write's hint, or the commit, wakes a look for it.)
        """
        held = self._holder.slots.held
        for report in reports:
            if report.kind is ReportKind.RELEASE:
                continue
            if report.spawn is not None:
                return True
            running = held.get(report.lease.job_id)
            if running is not None and running.job.has_children:
                return True
        return False

    async def report_and_claim(
        self, reports: list[Report], free: int, sent_at: float, *, releasing: bool = False
    ) -> tuple[list[Fenced], int]:
        """Send ``reports`` and claim up to ``free`` jobs in one request; hold those claimed.

        ``sent_at`` is when the request was sent, or earlier: a claimed
        lease runs from no sooner. ``releasing``: whether the reports may
        release jobs (``_may_release_jobs``), so that the claim brings the
        parents' outcomes. Returns the reports' verdicts and how many jobs came.
        """
        request = self._claim_request(free, releasing=releasing)
        run = self._report_runner(reports)
        answer: ReportAnswer = await run(job_report_claim(reports, request))
        await self._hold(answer, sent_at, asked=free)
        return answer.fenced, len(answer.claimed)

    async def claim_if_claimable(
        self, free: int, sent_at: float, *, turns: LookTurns = NO_TURNS
    ) -> int:
        """Claim up to ``free`` jobs alone, if a cheap read first says a claim would find one.

        An idle worker's look: the read and the claim go in one operation, so
        that the embedded store runs both in one trip to its thread. The claim
        is made in turn with the machine's other idle workers (``turns``): a
        look that found work but finds the turn taken waits for it and looks
        again, by when the other's claim is made. Returns how many jobs came;
        ``sent_at`` as for :meth:`report_and_claim`.
        """
        claimed = await self._look_once(free, sent_at, turns)
        if claimed is not None:
            return claimed
        async with turns.turn() as after_another:
            # Right after another worker's claim, a read of a node's own copy
            # could miss it and send a claim of nothing (a write by quorum).
            claimed = await self._look_once(free, sent_at, None, fresh=after_another)
        return claimed or 0

    async def _look_once(
        self, free: int, sent_at: float, turns: LookTurns | None, *, fresh: bool = False
    ) -> int | None:
        """One look: how many jobs came, or None if it found work and another held ``turns``."""
        turn_taken = False
        gate: Callable[[], AbstractContextManager[bool]] | None = None
        if turns is not None:
            look_turns = turns

            @contextlib.contextmanager
            def in_turn() -> Iterator[bool]:
                nonlocal turn_taken
                with look_turns.turn_if_free() as free_now:
                    turn_taken = not free_now
                    yield free_now

            gate = in_turn
        op = job_claimable_then(
            self._holder.settings.queues,
            job_report_claim([], self._claim_request(free)),
            fresh=fresh,
            gate=gate,
        )
        answer: ReportAnswer | None = await self._look(op)
        if answer is None:
            return None if turn_taken else 0
        await self._hold(answer, sent_at, asked=free)
        return len(answer.claimed)

    async def _hold(self, answer: ReportAnswer, sent_at: float, *, asked: int) -> None:
        """Hold the jobs ``answer`` claimed (their leases from ``sent_at``); hint the rest.

        ``asked``: how many the claim asked for (fewer came: the queues are drained).
        """
        self._holder.slots.prefetch.claim_came(len(answer.claimed), asked)
        for job in answer.claimed:
            if job.parent_count:
                self._parents_seen = time.monotonic()
            running = RunningJob(job, renewed_at=sent_at)
            self._holder.slots.hold(running)
            if self._holder.deadline.expired():
                # Back from a freeze or an outage: the jobs held from before are
                # past saving; the deadline must follow the leases just claimed.
                self._heartbeat.check_leases()
            else:
                self._holder.deadline.claimed(sent_at)
            self.last_claimed = running.started
        await self._hint(answer)

    async def _hint(self, answer: ReportAnswer) -> None:
        """Wake the idle workers of the queues where the write left jobs this one did not take.

        After the jobs claimed are held, so that the slots start them meanwhile.
        """
        if self._hints is not None and answer.freed_queues:
            await self._holder.run(self._hints.after_submit(answer.freed_queues))

    async def backlog(self, limit: int) -> int:
        """How many jobs a claim of this worker's would take now, counted up to ``limit``."""
        count: int = await self._holder.run(
            job_backlog(self._holder.settings.queues, self._holder.settings.labels, limit=limit)
        )
        return count

    def _claim_request(self, limit: int, *, releasing: bool = False) -> ClaimRequest:
        return ClaimRequest(
            worker_id=self._holder.worker_id,
            queues=self._holder.settings.queues,
            limit=limit,
            lease_seconds=self._holder.settings.lease_seconds,
            labels=self._holder.settings.labels,
            with_parents=releasing or self._with_parents(),
        )

    def _with_parents(self) -> bool:
        """Whether claims should bring the outcomes of a job's parents with it.

        Only while jobs with parents have come lately, or when the write's
        reports may release one (``releasing``): the clause costs every claim
        on rqlite, and without it the first job with parents a worker meets
        reads its parents' outcomes in a request of its own.
        """
        return time.monotonic() - self._parents_seen < PARENTS_SEEN_SECONDS
