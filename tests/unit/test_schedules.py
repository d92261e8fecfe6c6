from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from taskq import errors
from taskq.broker.schedule_timing import (
    SKIP_GRACE_SECONDS,
    CatchUp,
    due,
    latest_tick,
    next_tick,
    parse_duration,
    validate_timing,
)

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone: ZoneInfo = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_cron_ticks_are_read_in_the_schedules_time_zone() -> None:
    timing = validate_timing(
        cron="0 9 * * *", every_seconds=None, timezone="Europe/Berlin", anchor=0
    )
    assert next_tick(timing, at("2026-11-21T08:00:00")) == at("2026-11-21T09:00:00")
    assert next_tick(timing, at("2026-11-21T09:00:00")) == at("2026-11-22T09:00:00")
    assert latest_tick(timing, at("2026-11-21T09:00:00")) == at("2026-11-21T09:00:00")
    assert latest_tick(timing, at("2026-11-21T08:59:59")) == at("2026-11-20T09:00:00")


def test_intervals_count_from_the_anchor() -> None:
    timing = validate_timing(cron=None, every_seconds=10, timezone="UTC", anchor=1000.0)
    assert next_tick(timing, 1000.0) == 1010.0
    assert next_tick(timing, 1015.0) == 1020.0
    assert latest_tick(timing, 1029.9) == 1020.0
    assert latest_tick(timing, 999.0) is None


def test_a_due_tick_fires_and_the_next_is_booked() -> None:
    timing = validate_timing(cron=None, every_seconds=60, timezone="UTC", anchor=0.0)
    assert due(timing, 60.0, CatchUp.ONCE, now=59.0).fire_at is None
    decision = due(timing, 60.0, CatchUp.ONCE, now=61.0)
    assert (decision.fire_at, decision.next_fire_at) == (60.0, 120.0)


def test_after_a_gap_the_latest_tick_fires_once() -> None:
    timing = validate_timing(cron=None, every_seconds=60, timezone="UTC", anchor=0.0)
    decision = due(timing, 60.0, CatchUp.ONCE, now=3600.0 + 5)
    assert (decision.fire_at, decision.next_fire_at) == (3600.0, 3660.0)


def test_skip_drops_old_missed_ticks_but_not_a_fresh_one() -> None:
    timing = validate_timing(cron=None, every_seconds=600, timezone="UTC", anchor=0.0)
    assert due(timing, 600.0, CatchUp.SKIP, now=7200.0 + SKIP_GRACE_SECONDS + 1).fire_at is None
    assert due(timing, 600.0, CatchUp.SKIP, now=7200.0 + 1).fire_at == 7200.0


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"cron": "61 * * * *", "every_seconds": None, "timezone": "UTC"}, "bad cron expression"),
        # cronsim would read a sixth field as seconds: '0 3 * * * *' at minute 3 of every hour.
        (
            {"cron": "0 3 * * * *", "every_seconds": None, "timezone": "UTC"},
            "it has six fields; a schedule's has five",
        ),
        (
            {"cron": "* * * * *", "every_seconds": None, "timezone": "Mars/Base"},
            "unknown time zone",
        ),
        ({"cron": None, "every_seconds": None, "timezone": "UTC"}, "exactly one"),
        ({"cron": "* * * * *", "every_seconds": 5.0, "timezone": "UTC"}, "exactly one"),
        ({"cron": None, "every_seconds": -1.0, "timezone": "UTC"}, "at least 1 second"),
    ],
)
def test_bad_timings_are_named(kwargs: dict[str, object], complaint: str) -> None:
    with pytest.raises(errors.ConfigError, match=complaint):
        validate_timing(anchor=0.0, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("2h", 7200.0), ("1d", 86400.0), ("250ms", 0.25)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "5 years", "0s", "-5m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(errors.ConfigError):
        parse_duration(text)


@pytest.mark.parametrize("every", [0.001, 0.5, 0.0, -1.0, float("nan"), float("inf")])
def test_an_interval_below_a_second_or_not_a_number_is_refused(every: float) -> None:
    # Schedules fire on maintenance's tick, once a second: 0.5 s would fire once a second.
    with pytest.raises(errors.InvalidSetting, match="at least 1 second") as refused:
        validate_timing(cron=None, every_seconds=every, timezone="UTC", anchor=0.0)
    assert refused.value.field == "every_seconds"


def test_an_interval_of_one_second_is_taken() -> None:
    timing = validate_timing(cron=None, every_seconds=1.0, timezone="UTC", anchor=0.0)
    assert next_tick(timing, 0.0) == 1.0
