"""Publishing the jobs a worker serves: the ``@taskq.job`` declarations of its ``--modules``.

The declarations come from the module check's child, which imports the
modules (module code never runs in the worker); they are written once, at
start, before the worker registers, so that by the time it is live a submit
by name finds what it declares (``taskq.broker.ops.functions``).
"""

from __future__ import annotations

from collections.abc import Sequence

from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, function_publish
from taskq.broker.stores.store import Store
from taskq.worker.events import EventLog


def publish(
    store: Store, worker_id: str, declarations: Sequence[Declaration], events: EventLog
) -> None:
    """Write what ``worker_id`` serves; a store that fails here is told, and the worker goes on.

    A worker that could not publish still runs the jobs it is given: only
    submits by name of jobs no other worker declared are refused meanwhile.
    """
    if not declarations:
        return
    try:
        plan.run(store, function_publish(worker_id, declarations))
    except errors.StoreError as exc:
        events.emit("publish_failed", worker=worker_id, error=str(exc))
        return
    events.emit(
        "jobs_published",
        worker=worker_id,
        jobs=",".join(declaration.name for declaration in declarations),
    )
