"""When schedules fire: their timing, checked and read, without the store.

A schedule is a cron expression (five fields, read in its time zone by
cronsim) or a fixed interval anchored at its creation. Whatever the gap since
the last run, at most one tick fires per round: the latest one due. With
``catch_up="skip"`` a tick older than ``SKIP_GRACE_SECONDS`` fires not at all.
The operations that store and fire schedules are in
:mod:`taskq.broker.ops.schedules`; the client, the CLI and the server check
and describe timings with this module alone.
"""

from __future__ import annotations

import enum
import math
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from taskq import errors
from taskq.bounds import Bounds, Text

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

# cronsim and zoneinfo (about 4 ms of imports) are imported where a timing is
# computed: a worker or a command that meets no schedule never needs them.

SKIP_GRACE_SECONDS = 60.0
NAME = Text(1, 100, r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
"""A schedule's name (checked by :func:`validate_name`, stated by the HTTP API's schema)."""
INTERVAL = Bounds(1)
"""The seconds between the ticks of a schedule that is not cron's: schedules fire on
maintenance's tick, once a second, so a shorter interval would be told and not kept."""
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


class CatchUp(enum.StrEnum):
    """What to do with ticks missed while no scheduler ran."""

    ONCE = "once"  # fire the latest missed tick, once
    SKIP = "skip"  # fire none of them; wait for the next


class Timing(msgspec.Struct, frozen=True):
    """When a schedule fires: ``cron`` or ``every_seconds``, in ``timezone``."""

    cron: str | None
    every_seconds: float | None
    timezone: str
    anchor: float  # the creation time; intervals count from it

    def zone(self) -> ZoneInfo:
        from zoneinfo import ZoneInfo

        return ZoneInfo(self.timezone)


def parse_duration(text: str) -> float:
    """Seconds in ``"90"``, ``"90s"``, ``"10m"``, ``"2h"``, ``"1d"`` or ``"250ms"``."""
    match = _DURATION.match(text)
    if not match:
        raise errors.ConfigError(f"{text!r} is not a duration; write e.g. 30s, 10m, 2h, 1d")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise errors.ConfigError(f"duration {text!r} must be positive")
    return seconds


def validate_name(name: str) -> str:
    if not NAME.admits(name):
        raise errors.InvalidSetting(
            f"schedule name {name!r} must be 1-100 letters, digits, '_', '.', ':' or '-'",
            field="name",
        )
    return name


def validate_timing(
    *, cron: str | None, every_seconds: float | None, timezone: str, anchor: float
) -> Timing:
    """A checked :class:`Timing`; a bad expression or zone is an InvalidSetting naming it."""
    if (cron is None) == (every_seconds is None):
        raise errors.InvalidSetting(
            "a schedule needs exactly one of a cron expression or an interval"
        )
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    import cronsim

    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.InvalidSetting(
            f"unknown time zone {timezone!r}; e.g. UTC, Europe/Berlin", field="timezone"
        ) from None
    if cron is not None:
        if len(cron.split()) == 6:
            # cronsim reads a sixth field as seconds, first: '0 3 * * * *' would fire at
            # minute 3 of every hour, where its writer most likely meant 03:00.
            raise errors.InvalidSetting(
                f"bad cron expression {cron!r}: it has six fields; a schedule's has five "
                "(minute hour day-of-month month day-of-week), no seconds",
                field="cron",
            )
        try:
            cronsim.CronSim(cron, datetime.now(zone))
        except cronsim.CronSimError as exc:
            raise errors.InvalidSetting(
                f"bad cron expression {cron!r}: {exc}", field="cron"
            ) from None
    if every_seconds is not None and not (
        math.isfinite(every_seconds) and INTERVAL.admits(every_seconds)
    ):
        raise errors.InvalidSetting(
            f"interval must be at least 1 second (schedules fire at most once a second), "
            f"got {every_seconds:g}",
            field="every_seconds",
        )
    return Timing(cron=cron, every_seconds=every_seconds, timezone=timezone, anchor=anchor)


def next_tick(timing: Timing, after: float) -> float:
    """The first tick strictly after ``after``."""
    if timing.every_seconds is not None:
        steps = math.floor((after - timing.anchor) / timing.every_seconds) + 1
        return timing.anchor + max(steps, 0) * timing.every_seconds
    assert timing.cron is not None
    import cronsim

    start = datetime.fromtimestamp(after, timing.zone())
    return next(iter(cronsim.CronSim(timing.cron, start))).timestamp()


def latest_tick(timing: Timing, at_or_before: float) -> float | None:
    """The last tick at or before ``at_or_before`` (None before the first one)."""
    if timing.every_seconds is not None:
        if at_or_before < timing.anchor:
            return None
        steps = math.floor((at_or_before - timing.anchor) / timing.every_seconds)
        return timing.anchor + steps * timing.every_seconds
    assert timing.cron is not None
    import cronsim

    # cronsim walks strictly before its start: start a second late, then
    # step back over a tick that falls in that second.
    start = datetime.fromtimestamp(at_or_before, timing.zone()) + timedelta(seconds=1)
    ticks = iter(cronsim.CronSim(timing.cron, start, reverse=True))
    tick = next(ticks).timestamp()
    if tick > at_or_before:
        tick = next(ticks).timestamp()
    return tick


class Due(msgspec.Struct, frozen=True):
    """What a round should do for one schedule."""

    fire_at: float | None  # the tick to fire now, if any
    next_fire_at: float  # when to look again


def due(timing: Timing, next_fire_at: float, catch_up: CatchUp, now: float) -> Due:
    """Decide the round at ``now`` for a schedule that expected to fire at ``next_fire_at``."""
    if next_fire_at > now:
        return Due(fire_at=None, next_fire_at=next_fire_at)
    latest = latest_tick(timing, now)
    following = next_tick(timing, now)
    if latest is None or latest < next_fire_at:
        # The expected tick is not a tick (the timing changed): just move on.
        return Due(fire_at=None, next_fire_at=following)
    if catch_up is CatchUp.SKIP and now - latest > SKIP_GRACE_SECONDS:
        return Due(fire_at=None, next_fire_at=following)
    return Due(fire_at=latest, next_fire_at=following)


def describe(timing: Timing) -> str:
    """A short human description for listings."""
    if timing.cron is not None:
        import cronsim

        try:
            text = cronsim.CronSim(timing.cron, datetime.now(UTC)).explain()
        except (cronsim.CronSimError, ValueError, KeyError):
            text = timing.cron
        return f"{text} ({timing.timezone})"
    assert timing.every_seconds is not None
    return f"every {timing.every_seconds:g}s"


# -- operations -------------------------------------------------------------------
