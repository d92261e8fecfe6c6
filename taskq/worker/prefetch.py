"""How many jobs a worker claims beyond its free slots: some while jobs are short, none otherwise.

A busy worker refills its slots with the claim that rides along with its
acknowledgements, one store round trip per batch. When jobs take less time
than that round trip, the slots would sit empty while it is in flight, and
each batch would hold only as many jobs as there are slots. Claiming a few
jobs ahead keeps the slots busy and lets a round carry more jobs.

A job claimed ahead holds a lease while it waits for a slot, so the worker
only claims as many as its slots are expected to start within one round
trip, judged by the recent jobs' run times and rounds. Long jobs get none:
no job waits behind another job for longer than a round trip would take.
"""

from __future__ import annotations

# Weight of the newest sample in the running averages: about the last ten count.
_NEWEST_WEIGHT = 0.2


class Prefetch:
    """Running averages of job run time and report round time, and the jobs to claim ahead."""

    def __init__(self, *, slots: int, most: int) -> None:
        self.slots = slots
        self.most = most
        self._job_seconds: float | None = None
        self._round_seconds: float | None = None

    def job_ran(self, seconds: float) -> None:
        self._job_seconds = _averaged(self._job_seconds, seconds)

    def round_took(self, seconds: float) -> None:
        self._round_seconds = _averaged(self._round_seconds, seconds)

    @property
    def jobs(self) -> int:
        """Jobs to hold claimed beyond the slots: what the slots start within one round trip."""
        if self.most <= 0 or self._job_seconds is None or self._round_seconds is None:
            return 0
        if self._job_seconds <= 0:
            return self.most
        started_per_round = self.slots * self._round_seconds / self._job_seconds
        return min(self.most, int(started_per_round))


def _averaged(average: float | None, sample: float) -> float:
    sample = max(sample, 0.0)
    if average is None:
        return sample
    return average + _NEWEST_WEIGHT * (sample - average)
