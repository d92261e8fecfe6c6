"""How many jobs a worker claims beyond its free slots: some while jobs are short, none otherwise.

A busy worker refills its slots with the claim that rides along with its
acknowledgements, one store round trip per batch. When jobs take less time
than that round trip, the slots would sit empty while it is in flight, and
each batch would hold only as many jobs as there are slots. Claiming jobs
ahead keeps the slots busy and lets a round carry more jobs.

A job claimed ahead holds a lease while it waits for a slot, so the worker
only claims as many as its slots are expected to start within a short
horizon (one round trip, or ``AHEAD_SECONDS`` if that is longer), judged by
the recent jobs' run times and rounds. Long jobs get none. Averages look
back, and a long job can follow short ones: a slot whose job has run longer
than ``HAND_BACK_SECONDS`` is not counted as starting anything soon, and a
job claimed ahead that no slot started within ``HAND_BACK_SECONDS`` goes
back to the store, without using an attempt, for any worker to take.

Claimed further ahead than one round trip, the slots have work for longer
than a round takes, and the reports may wait to go together (see
:meth:`Prefetch.slack`): a replicated store then commits fewer, larger
batches, and each commit costs its nodes far more than a job does.

Once a claim comes back with fewer jobs than it asked for, the worker's
queues are drained: a claim riding with a report would find nothing to
refill the slots with, so the reports stop hurrying ahead of the held jobs
and gather for a batch, up to one round trip longer than usual (see
:meth:`Prefetch.linger`). The jobs of a burst then report in one write
rather than two, of which the second waits for the first; a workflow's
fan-in, released by the last of them, starts one write sooner.
"""

from __future__ import annotations

# Weight of the newest sample in the running averages: about the last ten count.
_NEWEST_WEIGHT = 0.2
# How long a job claimed ahead may wait for a slot when a round trip is shorter.
# On a 3-node rqlite cluster a commit costs the nodes about 6 ms of CPU and a
# no-op job in it about 0.08 ms: with 50 ms of short jobs claimed ahead, not
# one round trip's worth, two workers draining 5,000 no-op jobs on 2 cores
# committed 90 batches instead of 210, and the nodes spent 1.0 s of CPU
# instead of 1.7 s (paired runs). With 100 ms, about 12% sooner again and the
# nodes' CPU 1.51 -> 1.31 s (three rounds of 6 launches in turn); the embedded
# store's drain did not change (789 against 802 ms), nor did a fan-in's start
# after its parents' end on rqlite (p99 46 against 55 ms, 60 runs each).
AHEAD_SECONDS = 0.1
# The longest a job claimed ahead waits for a slot of its worker before it is
# handed back; and how long a slot's job must have run for the slot to count
# as busy beyond the horizon. Five times the horizon: short jobs claimed ahead
# start long before it, unless a long job stands in their way.
HAND_BACK_SECONDS = 0.5


class Prefetch:
    """Running averages of job run time and report round time, and the jobs to claim ahead."""

    def __init__(self, *, slots: int, most: int) -> None:
        self.slots = slots
        self.most = most
        self._job_seconds: float | None = None
        self._round_seconds: float | None = None
        self._drained = False

    def job_ran(self, seconds: float) -> None:
        self._job_seconds = _averaged(self._job_seconds, seconds)

    def round_took(self, seconds: float) -> None:
        self._round_seconds = _averaged(self._round_seconds, seconds)

    def claim_came(self, claimed: int, asked: int) -> None:
        """A claim asked for ``asked`` jobs and ``claimed`` came (fewer: the queues are drained)."""
        self._drained = claimed < asked

    @property
    def jobs(self) -> int:
        """Jobs to hold claimed beyond the slots, were every slot to take a job soon."""
        return self.ahead(self.slots)

    def ahead(self, ready_slots: int) -> int:
        """Jobs to hold claimed beyond the slots: what ``ready_slots`` start within the horizon.

        Slots running a job that outlasted ``HAND_BACK_SECONDS`` are not ready:
        a job claimed for them would wait behind it.
        """
        if self.most <= 0 or self._job_seconds is None or self._round_seconds is None:
            return 0
        if ready_slots <= 0:
            return 0
        if self._job_seconds <= 0:
            return self.most
        horizon = max(self._round_seconds, AHEAD_SECONDS)
        return min(self.most, int(ready_slots * horizon / self._job_seconds))

    def slack(self, unfinished: int) -> float | None:
        """How long ``unfinished`` held jobs keep the slots busy beyond one round trip.

        None while no job is claimed ahead, or when the last claim found the
        queues drained. At zero or below, a batch of reports should go now:
        the claim riding with it must arrive before the slots run out of jobs.
        """
        job, round_trip = self._job_seconds, self._round_seconds
        if job is None or round_trip is None or self.jobs <= 0 or self._drained:
            return None
        return unfinished * job / self.slots - round_trip

    def linger(self) -> float:
        """How much longer than its short delay a batch of reports may wait for the held
        jobs' reports: one round trip once the queues are drained, none otherwise.

        A burst's reports arrive over more than the short delay on a busy
        worker (50 no-op parents of a fan-in: 10-15 ms on 2 cores), and a
        batch sent before the last of them arrives makes the last one's
        report a second write, which waits for the first: the fan-in it
        releases starts a whole write later. Waiting one round trip more
        costs the reports already gathered at most what that second write
        would have cost the last one. While the queues still hold jobs, the
        claim riding with the batch is worth sending sooner (see ``slack``).
        """
        if not self._drained or self._round_seconds is None:
            return 0.0
        return self._round_seconds


def _averaged(average: float | None, sample: float) -> float:
    sample = max(sample, 0.0)
    if average is None:
        return sample
    return average + _NEWEST_WEIGHT * (sample - average)
