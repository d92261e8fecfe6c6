"""How a worker's roles reach the store: by running the same plans as every other caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from taskq.broker.ops import plan
from taskq.broker.ops.plan import Op
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Store

Run = Callable[[Op[Any]], Awaitable[Any]]


def store_runner(store: Store) -> Run:
    """Runs one operation on ``store`` and returns its answer."""

    async def run(op: Op[Any]) -> Any:
        return await plan.run_async(store, op)

    return run


def here_runner(store: Store) -> Run | None:
    """Runs one operation on ``store`` from the caller's event loop, for a worker with
    nothing else to do meanwhile; None for a cluster.

    On the embedded store each step runs on the caller's thread, with no trip
    to a worker thread and back: two thread switches, 0.1-0.2 ms each on a
    pipeline step's way from its parent's end to its own start (traced,
    issue 41). The commit's fsync blocks the loop; a step that would wait for
    another's write lock still goes to a thread. A cluster's steps are
    requests the loop awaits over async HTTP: nothing to save there.
    """
    if not isinstance(store, SqliteStore):
        return None

    async def run(op: Op[Any]) -> Any:
        return await plan.run_here_unless_waiting(store, op)

    return run


def look_runner(store: Store, *, holding: Callable[[], bool]) -> Run:
    """Runs an idle worker's look (a read, then a claim if it found work) on ``store``.

    On the embedded store in one trip to a worker thread, not one per step:
    each trip is two thread switches, a tenth of a millisecond or more apiece
    on two busy cores, and the look is most of a pickup (traced, issue 44).
    While the worker ``holding()`` no job, its event loop has nothing else to
    do, and the look runs there, with no trip at all (0.2 ms of a 3 ms pickup
    on 2 idle cores, measured); a step that would wait for another's write
    still goes to a thread, so the loop never waits for a lock.
    """
    here = here_runner(store)
    if here is None:
        return store_runner(store)

    async def run(op: Op[Any]) -> Any:
        if holding():
            return await plan.run_in_thread(store, op)
        return await here(op)

    return run
