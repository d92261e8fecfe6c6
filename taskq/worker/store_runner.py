"""How a worker's roles reach the store: by running the same plans as every other caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from taskq.broker.ops import plan
from taskq.broker.ops.plan import Op
from taskq.broker.stores.store import Store

Run = Callable[[Op[Any]], Awaitable[Any]]


def store_runner(store: Store) -> Run:
    """Runs one operation on ``store`` and returns its answer."""

    async def run(op: Op[Any]) -> Any:
        return await plan.run_async(store, op)

    return run
