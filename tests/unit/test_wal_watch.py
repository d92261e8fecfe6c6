"""An idle worker's wait on the embedded store: a commit from elsewhere ends it, nothing else does.

Every test bounds its waits: a wait that a commit should end is given a
minute and the test fails after ten seconds, so a missed wake-up fails
rather than passes slowly.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from taskq.broker.stores import sqlite_store, wal_watch
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Statement

_LONG_WAIT = 60.0
_BOUND = 10.0
# A wait an unmarked commit made meanwhile ends by its timeout: long enough for the commit
# to land first on a busy machine, short enough for the bound.
_UNMARKED_TIMEOUT = 3.0


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    # The worker's own loop is uvloop's, whose timers have a millisecond's grain.
    anyio.run(scenario, backend_options={"use_uvloop": True})


def _commit_elsewhere(path: Path) -> None:
    """One commit from another connection, as a client in another process makes."""
    other = SqliteStore(path)
    try:
        other.execute([Statement("INSERT INTO marks (at) VALUES (1)", {})])
    finally:
        other.close()


def _commit_unmarked(path: Path) -> None:
    """One commit by a writer that marks nothing (another program, an older taskq)."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("INSERT INTO marks (at) VALUES (2)")
    finally:
        other.close()


@pytest.fixture(params=["inotify", "polling"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SqliteStore]:
    if request.param == "polling":
        # As on a system without inotify, or with its watch limit reached.
        monkeypatch.setattr(wal_watch, "_watch_directory", lambda folder: None)
    store = SqliteStore(tmp_path / "jobs.db")
    store.execute([Statement("CREATE TABLE marks (at INTEGER)", {})])
    yield store
    store.close()


async def _wait_ended_by_commit(
    store: SqliteStore,
    first: Callable[[], None] = lambda: None,
    commit: Callable[[Path], None] = _commit_elsewhere,
) -> None:
    """Start a long wait; once it waits do ``first``, see it still wait, ``commit``, see it end."""
    ended = anyio.Event()

    async def wait() -> None:
        await store.wait_for_change(_LONG_WAIT)
        ended.set()

    with anyio.fail_after(_BOUND):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            first()
            await anyio.wait_all_tasks_blocked()
            assert not ended.is_set()
            await anyio.to_thread.run_sync(commit, store.path)
            await ended.wait()


def test_a_commit_from_another_connection_ends_the_wait(store: SqliteStore) -> None:
    _run(lambda: _wait_ended_by_commit(store))


def test_a_commit_made_between_two_waits_ends_the_next_at_once(store: SqliteStore) -> None:
    async def scenario() -> None:
        await _wait_ended_by_commit(store)
        # The caller looks at the store now; a commit lands meanwhile.
        await anyio.to_thread.run_sync(_commit_elsewhere, store.path)
        with anyio.fail_after(_BOUND):
            await store.wait_for_change(_LONG_WAIT)

    _run(scenario)


def test_a_wait_with_no_commit_ends_at_its_timeout(store: SqliteStore) -> None:
    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            await store.wait_for_change(0.05)

    _run(scenario)


def test_writes_to_other_files_beside_the_store_do_not_end_the_wait(
    store: SqliteStore,
) -> None:
    def write_beside() -> None:
        (store.path.parent / "notes.txt").write_text("not a commit")

    async def scenario() -> None:
        await store.wait_for_change(0.01)  # the watcher exists; later writes are news
        await _wait_ended_by_commit(store, write_beside)

    _run(scenario)


def test_two_waits_at_once_both_end_on_a_commit(store: SqliteStore) -> None:
    async def scenario() -> None:
        ended = [anyio.Event(), anyio.Event()]

        async def wait(index: int) -> None:
            await store.wait_for_change(_LONG_WAIT)
            ended[index].set()

        with anyio.fail_after(_BOUND):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait, 0)
                tasks.start_soon(wait, 1)
                await anyio.wait_all_tasks_blocked()
                await anyio.to_thread.run_sync(_commit_elsewhere, store.path)
                for event in ended:
                    await event.wait()

    _run(scenario)


def test_on_linux_the_wait_is_told_by_inotify_rather_than_polling(tmp_path: Path) -> None:
    # taskq's workers run on Linux only (pidfds, prctl): there inotify must serve.
    watcher = wal_watch.WalWatcher(tmp_path / "jobs.db")
    try:
        assert watcher.uses_inotify
    finally:
        watcher.close()


def test_a_client_that_never_waits_loads_no_watcher(tmp_path: Path) -> None:
    """Only a waiting process pays for inotify (its import runs ``ldconfig``)."""
    url = f"sqlite://{tmp_path / 'jobs.db'}"
    script = (
        f"import sys, taskq; taskq.Client({url!r}).submit('m:f', unchecked=True); "
        "print('asyncinotify' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.strip() == "False", shown


async def _unmarked_commit_during(
    wait: Callable[[float], Coroutine[object, object, None]], path: Path
) -> None:
    """An unmarked commit lands while ``wait`` waits: it ends by its timeout while the
    watcher listens to the marks alone, at once else."""
    with anyio.fail_after(_BOUND):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait, _UNMARKED_TIMEOUT)
            await anyio.wait_all_tasks_blocked()
            await anyio.to_thread.run_sync(_commit_unmarked, path)


def test_a_commit_by_a_writer_that_marks_nothing_ends_the_wait(store: SqliteStore) -> None:
    """Listening to the marks alone, the watcher sees an unmarked commit when its wait ends
    at its timeout; from then on it listens to the WAL too, and such a commit ends a wait."""

    async def scenario() -> None:
        await store.wait_for_change(0.01)  # the watcher exists, and the mark file
        await _unmarked_commit_during(store.wait_for_change, store.path)
        await _wait_ended_by_commit(store, commit=_commit_unmarked)

    _run(scenario)


def test_the_watcher_listens_to_the_marks_alone_again_once_writers_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    store.execute([Statement("CREATE TABLE marks (at INTEGER)", {})])
    watcher = wal_watch.WalWatcher(store.path)

    async def scenario() -> None:
        await watcher.wait(0.01)
        assert watcher.marks_only
        await _unmarked_commit_during(watcher.wait, store.path)
        for trial_seconds, marks_only in ((60.0, False), (0.0, True)):
            # A wait begun this long after the last unmarked commit listens to the marks alone.
            monkeypatch.setattr(wal_watch, "_MARKS_TRIAL_SECONDS", trial_seconds)
            await anyio.to_thread.run_sync(_commit_elsewhere, store.path)
            with anyio.fail_after(_BOUND):
                await watcher.wait(_LONG_WAIT)
            assert watcher.marks_only is marks_only

    try:
        _run(scenario)
    finally:
        watcher.close()
        store.close()


def test_a_marked_commit_ends_the_wait_without_polling_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A taskq writer's mark is heard: nothing wakes at the commit's writes to the WAL, and no
    thread looks at the store while the commit is under way."""
    looked: list[str] = []

    def settle(self: wal_watch.WalWatcher, since: int) -> bool:
        looked.append("settle")
        return False

    async def poll(self: wal_watch.WalWatcher, seconds: float, since: int) -> None:
        looked.append("poll")
        await anyio.sleep(seconds)

    async def mark_heard(self: wal_watch.WalWatcher, inotify: object) -> bool:
        looked.append("woken by a write to the WAL")
        return True

    monkeypatch.setattr(wal_watch.WalWatcher, "_mark_heard", mark_heard)
    monkeypatch.setattr(wal_watch.WalWatcher, "_settle", settle)
    monkeypatch.setattr(wal_watch.WalWatcher, "_poll_for_change", poll)
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        store.execute([Statement("CREATE TABLE marks (at INTEGER)", {})])
        for _ in range(3):
            _run(lambda: _wait_ended_by_commit(store))
    finally:
        store.close()
    assert looked == []
    assert wal_watch.commit_mark_path(store.path).exists()


def test_a_store_whose_commits_cannot_be_marked_still_commits(tmp_path: Path) -> None:
    """Where no mark file can be written (here a folder stands in its place), nothing fails."""
    wal_watch.commit_mark_path(tmp_path / "jobs.db").mkdir()
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        store.execute([Statement("CREATE TABLE marks (at INTEGER)", {})])
        store.execute([Statement("INSERT INTO marks (at) VALUES (1)", {})])
        assert store.query(Statement("SELECT count(*) AS n FROM marks", {})) == [{"n": 1}]
    finally:
        store.close()


def test_the_first_wait_makes_its_watcher_without_stalling_the_loop(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making the watcher looks libc up in a subprocess (5-20 ms): meanwhile the loop runs on,
    as a worker's does with reports to send. Here the making waits for the loop to run a task."""
    loop_ran = threading.Event()
    loop_ran_while_making: list[bool] = []
    make_watcher = sqlite_store.WalWatcher

    def slowly_made(path: Path) -> wal_watch.WalWatcher:
        loop_ran_while_making.append(loop_ran.wait(_BOUND / 2))
        return make_watcher(path)

    monkeypatch.setattr(sqlite_store, "WalWatcher", slowly_made)

    async def scenario() -> None:
        with anyio.fail_after(_BOUND):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(store.wait_for_change, 0.01)
                await anyio.sleep(0)  # the wait has started: it makes the watcher now
                loop_ran.set()

    _run(scenario)
    assert loop_ran_while_making == [True]
