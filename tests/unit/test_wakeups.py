"""Wake-up hints: a submit reaches the listening workers of its queue, and nothing else wakes them.

Waits that a hint should end are given a minute and the test fails after
ten seconds, so a lost hint fails rather than passes slowly.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import anyio.to_thread
import pytest

from taskq.broker.client import wake_sender
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_set_state
from taskq.broker.stores import wake_hints
from taskq.broker.stores.store import Store
from tests.support.hinted_workers import register_worker

_LONG_WAIT = 60.0
_BOUND = 10.0


@pytest.fixture
def listener() -> Iterator[wake_hints.WakeListener]:
    opened = wake_hints.WakeListener("127.0.0.1")
    yield opened
    opened.close()


def _send(address: str, datagram: bytes) -> None:
    host, _, port = address.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.sendto(datagram, (host, int(port)))


async def _ended_by(listener: wake_hints.WakeListener, act: Callable[[], Awaitable[None]]) -> bool:
    """Start a long wait, do ``act`` once it waits; whether the wait ended of it."""
    ended = anyio.Event()

    async def wait() -> None:
        await listener.wait(_LONG_WAIT)
        ended.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        await act()
        await anyio.wait_all_tasks_blocked()
        if not ended.is_set():
            tasks.cancel_scope.cancel()
            return False
    return True


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    # The worker's loop is uvloop's.
    anyio.run(scenario, backend_options={"use_uvloop": True})


def test_a_hint_ends_the_wait(listener: wake_hints.WakeListener) -> None:
    async def hint() -> None:
        _send(listener.address, wake_hints.HINT)

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            assert await _ended_by(listener, hint)

    _run(scenario)


def test_a_datagram_that_is_not_a_hint_is_ignored(listener: wake_hints.WakeListener) -> None:
    async def garbage() -> None:
        _send(listener.address, b"taskq wake 1 and more")
        _send(listener.address, b"\x00" * 400)

    async def hint() -> None:
        _send(listener.address, wake_hints.HINT)

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            assert not await _ended_by(listener, garbage)
            assert await _ended_by(listener, hint)  # still listening

    _run(scenario)


def test_with_no_hint_the_wait_ends_at_its_timeout(listener: wake_hints.WakeListener) -> None:
    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            await listener.wait(0.05)

    _run(scenario)


def test_an_idle_worker_looks_seldom_until_a_hint_and_often_after_it(
    listener: wake_hints.WakeListener,
) -> None:
    # Listening: its looks only catch what no hint told of. Soon after a hint:
    # the node it reads may not have the job yet. With no socket: it must poll.
    idle = wake_hints.look_seconds(_LONG_WAIT, listener)
    assert wake_hints.look_seconds(_LONG_WAIT, None) < idle
    assert wake_hints.look_seconds(0.001, listener) == 0.001  # never past the caller's wait

    async def hint() -> None:
        _send(listener.address, wake_hints.HINT)

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            assert not listener.hinted_within(_LONG_WAIT)
            assert await _ended_by(listener, hint)
        assert listener.hinted_within(_LONG_WAIT)
        assert wake_hints.look_seconds(_LONG_WAIT, listener) < idle

    _run(scenario)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    yield opened
    opened.close()


def test_a_submit_hints_the_active_workers_of_its_queue_only(
    sqlite_store: Store, listener: wake_hints.WakeListener
) -> None:
    other = wake_hints.WakeListener("127.0.0.1")
    gone = wake_hints.WakeListener("127.0.0.1")
    register_worker(sqlite_store, "w-mail", ["mail"], listener.address)
    register_worker(sqlite_store, "w-video", ["video"], other.address)
    register_worker(sqlite_store, "w-gone", ["mail"], gone.address)
    plan.run(sqlite_store, worker_set_state("w-gone", "stopped"))
    sender = wake_sender.WakeSender()

    async def submitted() -> None:
        await anyio.to_thread.run_sync(plan.run, sqlite_store, sender.after_submit({"mail"}))

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            assert not await _ended_by(other, submitted)
            assert not await _ended_by(gone, submitted)
            assert await _ended_by(listener, submitted)

    try:
        _run(scenario)
    finally:
        other.close()
        gone.close()


def test_a_client_that_knew_no_worker_of_the_queue_finds_one_registered_after_it(
    sqlite_store: Store, listener: wake_hints.WakeListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Workers and clients start together: the client's first read may come
    # before any worker has registered, and must not hide them for long.
    now = [1000.0]
    monkeypatch.setattr(wake_sender, "time", SimpleNamespace(monotonic=lambda: now[0]))
    sender = wake_sender.WakeSender()

    async def submitted() -> None:
        await anyio.to_thread.run_sync(plan.run, sqlite_store, sender.after_submit({"mail"}))

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            await submitted()  # reads the addresses: no worker yet
            register_worker(sqlite_store, "w-mail", ["mail"], listener.address)
            now[0] += 0.25  # well within the seconds addresses of known workers are kept
            assert await _ended_by(listener, submitted)

    _run(scenario)


def test_workers_listen_on_a_cluster_and_not_on_the_embedded_store(
    sqlite_store: Store,
) -> None:
    assert not isinstance(sqlite_store, wake_hints.HintedStore)
    assert wake_hints.hint_address(sqlite_store) is None
