"""The worker's lease deadline: what each keeper is told, and when."""

from __future__ import annotations

import math

from taskq.worker.lease_deadline import LeaseDeadline


class Keeper:
    def __init__(self) -> None:
        self.told: list[float] = []

    def set_deadline(self, kill_by: float) -> None:
        self.told.append(kill_by)


def test_a_keeper_hears_the_deadline_when_attached_and_when_it_moves() -> None:
    deadline = LeaseDeadline(lease_seconds=30, margin_seconds=2)
    keeper = Keeper()
    deadline.attach(keeper)
    assert keeper.told == [math.inf]  # no lease held: nothing to kill

    deadline.claimed(100.0)
    assert deadline.kill_by == 128.0
    # A later claim leaves the deadline to the older lease, which expires first.
    deadline.claimed(105.0)
    assert keeper.told == [math.inf, 128.0]

    deadline.held_since(110.0)  # a heartbeat renewed every lease held
    assert keeper.told[-1] == 138.0
    deadline.held_since(110.3)  # later by less than the step: not worth a message
    assert keeper.told[-1] == 138.0
    assert deadline.kill_by == 138.0
    deadline.held_since(None)  # the last lease went
    assert keeper.told[-1] == math.inf

    deadline.detach(keeper)
    deadline.claimed(200.0)
    assert keeper.told[-1] == math.inf


def test_an_earlier_deadline_goes_out_at_once() -> None:
    deadline = LeaseDeadline(lease_seconds=10, margin_seconds=1)
    keeper = Keeper()
    deadline.held_since(50.0)
    deadline.attach(keeper)
    deadline.held_since(49.9)  # an older lease is held now: earlier, however slightly
    assert keeper.told == [59.0, 58.9]


def test_the_deadline_expires_on_the_monotonic_clock() -> None:
    deadline = LeaseDeadline(lease_seconds=10, margin_seconds=1)
    assert not deadline.expired()
    deadline.held_since(-100.0)
    assert deadline.expired()
