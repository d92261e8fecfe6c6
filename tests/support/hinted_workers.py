"""A worker row as the wake-up hint tests need it: its queues and where it listens, nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_register
from taskq.broker.stores.store import Store


def register_worker(
    store: Store, worker_id: str, queues: Sequence[str], wake_address: str | None
) -> None:
    """Record an active one-slot worker of ``queues`` listening at ``wake_address`` (or nowhere)."""
    plan.run(
        store,
        worker_register(
            worker_id,
            name=worker_id,
            host="here",
            pid=1,
            queues=queues,
            labels=[],
            slots=1,
            wake_address=wake_address,
        ),
    )
