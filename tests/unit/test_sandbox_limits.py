"""Parsing and clamping a job's resource limits."""

from __future__ import annotations

import pytest

from taskq.broker.limits import Limits, LimitsInvalid, parse_limits


def test_missing_keys_keep_the_defaults() -> None:
    defaults = Limits(cpu_seconds=7)
    assert parse_limits({"open_files": 64}, defaults=defaults) == Limits(
        cpu_seconds=7, open_files=64
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(4096, 4096), ("4096", 4096), ("512MiB", 512 << 20), ("2 GiB", 2 << 30), ("1kib", 1024)],
)
def test_sizes_take_bytes_or_binary_units(raw: object, expected: int) -> None:
    assert parse_limits({"memory_bytes": raw}).memory_bytes == expected


def test_wall_seconds_may_be_fractional() -> None:
    assert parse_limits({"wall_seconds": 1}).wall_seconds == 1.0
    assert parse_limits({"wall_seconds": 0.25}).wall_seconds == 0.25


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ({"memory_mb": 512}, "unknown limit(s) memory_mb"),
        ({"memory_bytes": "512MB"}, "memory_bytes = '512MB' is not a size"),
        ({"memory_bytes": 1.5}, "memory_bytes must be a whole number"),
        ({"cpu_seconds": "10"}, "cpu_seconds must be a whole number"),
        ({"cpu_seconds": True}, "cpu_seconds must be a whole number"),
        ({"wall_seconds": "soon"}, "wall_seconds must be a number of seconds"),
        ({"open_files": 0}, "open_files must be positive"),
        ({"wall_seconds": float("inf")}, "wall_seconds must be positive and finite"),
    ],
)
def test_mistakes_are_named(data: dict[str, object], complaint: str) -> None:
    with pytest.raises(LimitsInvalid) as caught:
        parse_limits(data)
    assert complaint in str(caught.value)


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(LimitsInvalid, match="cpu_seconds must be a whole number"):
        Limits(cpu_seconds=1.5)  # type: ignore[arg-type]


def test_bounded_by_lowers_only_what_exceeds_the_worker_maximum() -> None:
    job = Limits(memory_bytes=8 << 30, cpu_seconds=5, wall_seconds=10.0)
    worker_max = Limits(memory_bytes=2 << 30, cpu_seconds=60, wall_seconds=5.0)
    bounded = job.bounded_by(worker_max)
    assert (bounded.memory_bytes, bounded.cpu_seconds, bounded.wall_seconds) == (2 << 30, 5, 5.0)


def test_to_dict_round_trips() -> None:
    limits = Limits(memory_bytes=1 << 28, wall_seconds=2.5)
    assert parse_limits(limits.to_dict()) == limits
