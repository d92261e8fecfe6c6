"""Autoscaling a worker's slots: the settings, each step's size, and which idle slot may leave."""

from __future__ import annotations

import io
import json

import anyio
import pytest

from taskq import errors
from taskq.worker.autoscale import Autoscaler, growth
from taskq.worker.events import EventLog
from taskq.worker.prefetch import Prefetch
from taskq.worker.settings import settings_from
from taskq.worker.slots import Slots
from tests.unit.test_worker_slots import claimed

pytestmark = pytest.mark.anyio


def complaint(section: dict[str, object], flags: dict[str, object] | None = None) -> str:
    with pytest.raises(errors.ConfigError) as caught:
        settings_from(section, flags)
    return str(caught.value)


def test_autoscale_is_min_and_max_from_a_flag_or_the_file() -> None:
    flagged = settings_from({}, {"autoscale": " 2, 8"})
    assert (flagged.autoscale, flagged.min_slots, flagged.max_slots) == ((2, 8), 2, 8)
    assert settings_from({"autoscale": [1, 4]}).max_slots == 4
    # Without it, a fixed number of slots is both the least and the most.
    fixed = settings_from({"concurrency": 3})
    assert (fixed.autoscale, fixed.min_slots, fixed.max_slots) == (None, 3, 3)


def test_a_flag_for_one_way_of_counting_slots_overrides_the_files_other() -> None:
    assert settings_from({"concurrency": 4}, {"autoscale": "1,8"}).autoscale == (1, 8)
    overridden = settings_from({"autoscale": "1,8"}, {"concurrency": 2})
    assert (overridden.autoscale, overridden.min_slots) == (None, 2)
    assert "not both" in complaint({"concurrency": 4, "autoscale": "1,8"})


@pytest.mark.parametrize("value", ["8,1", "1;8", "0,8", "1,8,9", "one,8", [1], [1, True]])
def test_a_malformed_autoscale_is_one_line_naming_it(value: object) -> None:
    assert complaint({"autoscale": value}).startswith("worker: autoscale ")


def test_the_cpu_set_and_the_memory_budget_lower_the_most_slots() -> None:
    capped = settings_from(
        {"autoscale": "1,8", "max_limits": {"memory_bytes": "512MiB"}, "memory_budget": "1600MiB"}
    )
    assert capped.max_slots == 3  # each slot may be given a 512 MiB job
    assert capped.slot_ceiling[1] == "memory_budget (1.6 GiB, 512.0 MiB per job)"
    assert settings_from({"autoscale": "1,8", "cpus": "0"}).slot_ceiling == (1, "cpus (1 CPUs)")
    # A budget that cannot hold MIN (or a fixed concurrency) is refused, not lowered.
    line = complaint({"autoscale": "4,8", "memory_budget": "2GiB"})
    assert (
        line
        == "worker: 4 slot(s) do not fit memory_budget (2.0 GiB, 1.0 GiB per job), which allows 2"
    )
    assert "allows 1" in complaint({"concurrency": 2, "memory_budget": "1GiB"})
    assert "not a size" in complaint({"memory_budget": "lots"})


@pytest.mark.parametrize(
    ("slots", "idle", "backlog", "most", "added"),
    [
        (1, 0, 50, 8, 1),  # doubling: one slot adds one
        (4, 0, 50, 8, 4),
        (6, 0, 50, 8, 2),  # never above the most
        (4, 0, 3, 8, 3),  # no more than the backlog asks
        (4, 1, 50, 8, 0),  # a slot is idle: it takes the next job
        (4, 0, 0, 8, 0),
        (8, 0, 50, 8, 0),
    ],
)
def test_a_step_adds_what_the_backlog_asks_at_most_doubling(
    slots: int, idle: int, backlog: int, most: int, added: int
) -> None:
    assert growth(slots=slots, idle=idle, backlog=backlog, most=most) == added


def _autoscaler(slots: Slots, stream: io.StringIO) -> Autoscaler:
    return Autoscaler(
        slots=slots,
        least=1,
        most=4,
        interval=1.0,
        idle_seconds=5.0,
        events=EventLog(stream, format="json"),
        worker_id="w",
    )


def test_an_idle_slot_leaves_down_to_the_least_and_not_while_a_job_waits() -> None:
    stream = io.StringIO()
    slots = Slots(1, Prefetch(slots=1, most=0))
    scaler = _autoscaler(slots, stream)
    slots.add(2)
    assert (slots.count, slots.prefetch.slots, slots.to_claim()) == (3, 3, 3)
    slots.hold(claimed(1))
    assert not scaler.slot_may_leave()  # a claimed job waits for a slot: it takes it
    slots.take_waiting()
    assert scaler.slot_may_leave()
    assert scaler.slot_may_leave()
    assert not scaler.slot_may_leave()  # the least is kept
    assert slots.count == 1
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["event"], line["slots"], line["reason"]) for line in lines] == [
        ("slots_removed", 2, "idle"),
        ("slots_removed", 1, "idle"),
    ]


async def test_the_loop_grows_a_step_an_interval_and_rides_out_a_store_failure() -> None:
    stream = io.StringIO()
    slots = Slots(1, Prefetch(slots=1, most=0))
    scaler = _autoscaler(slots, stream)
    scaler.interval = 0.01
    draining = anyio.Event()
    asked: list[int] = []
    failures: list[errors.StoreError] = []

    async def backlog(limit: int) -> int:
        asked.append(limit)
        if len(asked) == 1:
            raise errors.StoreUnavailable("the store is restarting")
        return min(10, limit)  # as job_backlog, which counts to its limit

    async def add_slots(count: int) -> bool:
        slots.add(count)
        if slots.count == scaler.most:
            draining.set()
        return True

    with anyio.fail_after(5):
        await scaler.run(draining, backlog=backlog, add_slots=add_slots, on_outage=failures.append)
    assert len(failures) == 1
    # Each read counts only as far as the step could use: no more than doubling, or MAX.
    assert asked == [1, 1, 2]
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["added"], line["slots"], line["backlog"]) for line in lines] == [
        (1, 2, 1),
        (2, 4, 2),
    ]


async def test_an_idle_slot_waits_its_idle_time_then_leaves_unless_it_is_the_least() -> None:
    stream = io.StringIO()
    slots = Slots(2, Prefetch(slots=2, most=0))
    scaler = _autoscaler(slots, stream)
    scaler.idle_seconds = 0.02
    with anyio.fail_after(5):
        assert await scaler.next_job_or_leave() is None
        assert slots.count == 1
        job = claimed(3)
        slots.hold(job)
        assert await scaler.next_job_or_leave() is job
        # The least slot stays, waiting past its idle time for the next job.
        with anyio.move_on_after(0.1):
            await scaler.next_job_or_leave()
    assert slots.count == 1


def test_a_budget_that_is_not_a_size_is_not_called_a_limit() -> None:
    line = complaint({"memory_budget": "8GB"})
    assert "memory_budget = '8GB' is not a size" in line
    assert "limit" not in line
