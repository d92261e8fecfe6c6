"""The bench's account of the machine's CPU time: steal, idle and the rest, between snapshots."""

from __future__ import annotations

import pytest

from bench import host_cpu

BEFORE = "cpu  1000 0 200 5000 10 0 5 100 0 0\ncpu0 500 0 100 2500 5 0 2 50 0 0\n"
# 100 user, 0 nice, 50 system, 600 idle, 0 iowait, 0 irq, 0 softirq, 250 steal: 1,000 ticks.
AFTER = "cpu  1100 0 250 5600 10 0 5 350 0 0\ncpu0 550 0 125 2800 5 0 2 175 0 0\n"


def test_shares_are_each_kinds_part_of_the_ticks_between_two_snapshots() -> None:
    found = host_cpu.shares(host_cpu.parse(BEFORE), host_cpu.parse(AFTER))

    assert found["steal"] == pytest.approx(0.25)
    assert found["idle"] == pytest.approx(0.6)
    assert found["user"] == pytest.approx(0.1)
    assert sum(found.values()) == pytest.approx(1.0)


def test_a_kernel_without_steal_counts_none() -> None:
    old = host_cpu.parse("cpu  1000 0 200 5000\n")

    assert old.ticks == (1000, 0, 200, 5000, 0, 0, 0, 0)


def test_no_time_between_snapshots_or_no_snapshot_gives_no_shares() -> None:
    times = host_cpu.parse(BEFORE)

    assert host_cpu.shares(times, times) == {}
    assert host_cpu.shares(None, times) == {}


def test_a_text_that_is_not_proc_stat_is_refused() -> None:
    with pytest.raises(ValueError, match="/proc/stat"):
        host_cpu.parse("intr 12345\n")


def test_this_machines_times_read_and_never_fall() -> None:
    before = host_cpu.read()
    after = host_cpu.read()

    assert before is not None
    assert after is not None
    assert all(now >= then for then, now in zip(before.ticks, after.ticks, strict=True))


def test_a_measures_window_is_kept_for_the_figures_added_after_it() -> None:
    snapshots = iter([host_cpu.parse(BEFORE), host_cpu.parse(AFTER)])
    clock = iter([0.0, 5.0, 5.0, 5.05])
    window = host_cpu.HostWindow(lambda: next(snapshots), lambda: next(clock))  # BEFORE at 0 s

    measured = window.shares_of_last_measure()  # 5 s later: reads AFTER, ends the window
    derived = window.shares_of_last_measure()  # 0.05 s after that: too short, the same shares

    assert measured == {"host_steal": 0.25, "host_idle": 0.6}
    assert derived == measured
