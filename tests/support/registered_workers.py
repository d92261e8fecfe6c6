"""Workers stood in for by their registrations: what `taskq workers`, `GET /workers` and the
console list, with no worker process behind them."""

from __future__ import annotations

from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_register
from taskq.broker.stores.store import Store
from taskq.broker.worker_policy import Policy


def register(store: Store, worker_id: str, queue: str, policy: Policy | None) -> None:
    """Register ``worker_id`` (also its name) on ``queue``, recording ``policy`` (None: none,
    as a worker of an older taskq)."""
    plan.run(
        store,
        worker_register(
            worker_id,
            name=worker_id,
            host="lab.host",
            pid=4100,
            queues=[queue],
            labels=[],
            slots=1,
            policy=policy,
        ),
    )
