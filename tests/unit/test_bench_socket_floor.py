"""The bench's floor under any request: a loopback round trip to a process that only echoes."""

from __future__ import annotations

import math

import pytest

from bench import socket_floor


def test_a_round_trip_is_timed_through_another_process() -> None:
    floor = socket_floor.round_trip_ms(50)

    assert math.isfinite(floor)
    # A round trip takes some microseconds; a whole second means the echo never came.
    assert 0 < floor < 1000


@pytest.mark.parametrize(
    ("client_rate", "round_trip_ms", "expected"),
    [
        (2500.0, 0.0, 1.0),  # no round trip: a free server keeps the client's pace
        (2500.0, 0.4, 0.5),  # a 0.4 ms submit and a 0.4 ms round trip: half
        (1000.0, 0.25, 0.8),  # 1 ms against 1.25 ms
    ],
)
def test_the_ratio_within_reach_adds_one_round_trip_to_each_submit(
    client_rate: float, round_trip_ms: float, expected: float
) -> None:
    assert socket_floor.reachable_ratio(client_rate, round_trip_ms) == pytest.approx(expected)
