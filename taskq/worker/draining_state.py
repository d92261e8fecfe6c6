"""Telling the store that a worker drains: its state goes from active to draining.

The drain itself is the worker's own (its roles read an in-process event);
the state is for everyone else. ``taskq workers`` shows it, ``taskq queues``
still counts the worker as live, and a wait on a queue that only draining
workers take says no active worker serves it (``broker/unserved.py``), as a
draining worker claims nothing. Its heartbeats leave the state as it is,
and maintenance marks a draining worker lost only when they stop, as it does
an active one; its next heartbeat, which says it drains, makes it draining
again. Its last write, on leaving, makes it ``stopped``.
"""

from __future__ import annotations

import anyio

from taskq import errors
from taskq.broker.ops.workers import worker_set_state
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import Run
from taskq.worker.waiting import first_of


async def write_draining(
    run: Run,
    worker_id: str,
    *,
    draining: anyio.Event,
    stopped: anyio.Event,
    outage: StoreOutage,
    retry_seconds: float,
) -> None:
    """Once ``draining`` is set, record the worker as draining in the store.

    A write the store refuses is told as an outage and tried again every
    ``retry_seconds`` until one lands or the worker has stopped: a store
    that fails for a moment must not end a drain that is handing jobs back.
    """
    await first_of(draining, stopped)
    while not stopped.is_set():
        try:
            await run(worker_set_state(worker_id, "draining"))
        except errors.StoreError as exc:
            outage.failed(exc)
        else:
            outage.written()
            return
        with anyio.move_on_after(retry_seconds):
            await stopped.wait()
