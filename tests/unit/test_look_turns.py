"""Idle workers of one store on one machine looking in turn: one at a time, never stuck behind one.

Two ``LookTurns`` on one folder hold separate descriptors, so they exclude
each other as two worker processes would. Every wait is bounded: a turn that
should come is given ten seconds, so a missed one fails rather than hangs.
"""

from __future__ import annotations

import fcntl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from taskq.broker.stores import look_turns
from taskq.broker.stores.look_turns import NO_TURNS, LookTurns, look_turns_of
from taskq.broker.stores.sqlite_store import SqliteStore

_BOUND = 10.0


def _run_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    # The worker's own loop is uvloop's.
    anyio.run(scenario, backend_options={"use_uvloop": True})


def _looks(turns: LookTurns, *, while_held_by: LookTurns | None = None) -> bool:
    """Whether a look with ``turns`` gets in within the bound, while another holds its turn."""
    looked = False

    async def look() -> None:
        nonlocal looked
        with anyio.fail_after(_BOUND):
            async with turns.turn():
                looked = True

    async def scenario() -> None:
        if while_held_by is None:
            await look()
            return
        async with while_held_by.turn():
            await look()

    _run_uvloop(scenario)
    return looked


@dataclass
class _Held:
    """What happened when a second look asked for the turn while a first held it."""

    order: list[str] = field(default_factory=list)
    order_while_held: list[str] = field(default_factory=list)
    told: dict[str, bool] = field(default_factory=dict)


def _second_asks_while_first_holds(first: LookTurns, second: LookTurns) -> _Held:
    held = _Held()

    async def scenario() -> None:
        holding = anyio.Event()
        let_go = anyio.Event()

        async def hold() -> None:
            async with first.turn() as after_another:
                held.order.append("first in")
                held.told["first"] = after_another
                holding.set()
                await let_go.wait()
                held.order.append("first out")

        async def look() -> None:
            await holding.wait()
            async with second.turn() as after_another:
                held.order.append("second in")
                held.told["second"] = after_another

        with anyio.fail_after(_BOUND):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(hold)
                tasks.start_soon(look)
                await holding.wait()
                await anyio.sleep(0.02)
                held.order_while_held = list(held.order)
                let_go.set()

    _run_uvloop(scenario)
    return held


def _turn_after(first: LookTurns, second: LookTurns) -> tuple[bool, bool]:
    """What the blocks of ``first`` and ``second`` are told; ``second`` asks as ``first`` holds."""
    told = _second_asks_while_first_holds(first, second).told
    return told["first"], told["second"]


def test_a_second_look_waits_until_the_first_gives_the_turn_back(tmp_path: Path) -> None:
    first, second = LookTurns(tmp_path), LookTurns(tmp_path)
    try:
        held = _second_asks_while_first_holds(first, second)
    finally:
        first.close()
        second.close()
    # The second look had tried and was waiting: it had not come in.
    assert held.order_while_held == ["first in"]
    assert held.order == ["first in", "first out", "second in"]


def test_a_turn_held_too_long_is_looked_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder frozen with the turn delays the others' looks, and no more than the bound."""
    monkeypatch.setattr(look_turns, "_LONGEST_WAIT_SECONDS", 0.05)
    frozen, other = LookTurns(tmp_path), LookTurns(tmp_path)
    try:
        assert _looks(other, while_held_by=frozen)
    finally:
        frozen.close()
        other.close()


def test_the_turn_is_taken_again_after_each_look(tmp_path: Path) -> None:
    one, two = LookTurns(tmp_path), LookTurns(tmp_path)

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            for _ in range(3):
                async with one.turn():
                    pass
                async with two.turn():
                    pass

    try:
        _run_uvloop(scenario)
    finally:
        one.close()
        two.close()


def test_without_flock_a_look_goes_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    turns = LookTurns(tmp_path)
    try:
        assert _looks(turns)
    finally:
        turns.close()


def test_a_folder_that_cannot_be_opened_takes_no_turns(tmp_path: Path) -> None:
    turns = LookTurns(tmp_path / "gone")
    try:
        assert _looks(turns)
    finally:
        turns.close()


def test_the_embedded_store_takes_turns_and_other_stores_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the other process's giving the turn back lets the store's look in.
    monkeypatch.setattr(look_turns, "_LONGEST_WAIT_SECONDS", _BOUND)
    store = SqliteStore(tmp_path / "jobs.db")
    other_process = LookTurns(tmp_path)
    order: list[str] = []

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            assert look_turns_of(object()) is NO_TURNS
            async with look_turns_of(object()).turn():
                order.append("a store without turns looks at once")
            async with anyio.create_task_group() as tasks, other_process.turn():

                async def look() -> None:
                    async with look_turns_of(store).turn():
                        order.append("the store's look")

                tasks.start_soon(look)
                await anyio.sleep(0.02)
                order.append("the other process's look")

    try:
        _run_uvloop(scenario)
    finally:
        store.close()
        other_process.close()
    assert order == [
        "a store without turns looks at once",
        "the other process's look",
        "the store's look",
    ]


def test_a_look_is_told_whether_another_looked_just_before(tmp_path: Path) -> None:
    first, second = LookTurns(tmp_path), LookTurns(tmp_path)
    try:
        assert _turn_after(first, second) == (False, True)
    finally:
        first.close()
        second.close()


def test_the_idle_workers_of_one_cluster_share_a_turn_and_of_two_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    one = look_turns.cluster_turns(["10.0.0.1:4001", "10.0.0.2:4001"])
    same = look_turns.cluster_turns(["10.0.0.2:4001", "10.0.0.1:4001"])  # another order
    other = look_turns.cluster_turns(["10.0.0.9:4001"])
    try:
        assert _turn_after(one, same) == (False, True)
        assert _turn_after(one, other) == (False, False)
    finally:
        for turns in (one, same, other):
            turns.close()
    assert (tmp_path / "taskq").stat().st_mode & 0o777 == 0o700


def test_a_runtime_folder_others_may_enter_takes_no_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another user able to take the lock could hold every look up to its bound.
    monkeypatch.setattr(look_turns, "_LONGEST_WAIT_SECONDS", _BOUND)
    (tmp_path / "taskq").mkdir(mode=0o755)
    (tmp_path / "taskq").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    first = look_turns.cluster_turns(["10.0.0.1:4001"])
    second = look_turns.cluster_turns(["10.0.0.1:4001"])
    try:
        # Neither holds a turn: the second looks at once, told of no other look.
        assert _turn_after(first, second) == (False, False)
    finally:
        first.close()
        second.close()
    assert list((tmp_path / "taskq").iterdir()) == []


def test_a_turn_taken_only_if_free_is_held_in_the_block_and_given_back(tmp_path: Path) -> None:
    first, other = LookTurns(tmp_path), LookTurns(tmp_path)
    try:
        with first.turn_if_free() as may_claim:
            assert may_claim
            with other.turn_if_free() as other_may_claim:
                assert not other_may_claim, "another's look holds the turn"
        with other.turn_if_free() as other_may_claim:
            assert other_may_claim, "the turn was given back"
    finally:
        first.close()
        other.close()


def test_without_turns_a_look_may_always_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with NO_TURNS.turn_if_free() as may_claim:
        assert may_claim
    gone = LookTurns(tmp_path / "gone")
    with gone.turn_if_free() as may_claim:
        assert may_claim

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(38, "Function not implemented")

    turns = LookTurns(tmp_path)
    monkeypatch.setattr(fcntl, "flock", no_flock)
    try:
        with turns.turn_if_free() as may_claim:
            assert may_claim
    finally:
        turns.close()
