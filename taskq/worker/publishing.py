"""Publishing the jobs a worker serves: the ``@taskq.job`` declarations of its ``--modules``.

The declarations come from the module check's child, which imports the
modules (module code never runs in the worker); they are written at start,
before the worker registers, so that by the time it is live a submit by name
finds what it declares (``taskq.broker.ops.functions``). A store that fails
then (it is away, full, electing a leader) costs the worker nothing: it
works, and tries again every heartbeat interval until the write lands.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from taskq import errors
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, function_publish
from taskq.broker.stores.store import Store
from taskq.worker.events import EventLog
from taskq.worker.store_runner import Run


class Publisher:
    """What one worker serves, written once: at start, else on a later try."""

    def __init__(
        self, worker_id: str, declarations: Sequence[Declaration], events: EventLog
    ) -> None:
        self.worker_id = worker_id
        self.declarations = tuple(declarations)
        self._events = events
        self.pending = bool(self.declarations)
        """Whether the declarations are yet to be written (none to write: False)."""
        self._told = False

    def publish(self, store: Store) -> None:
        """Write them now, at start, blocking; a store that fails is told, and tried later."""
        if not self.pending:
            return
        try:
            plan.run(store, function_publish(self.worker_id, self.declarations))
        except errors.StoreError as exc:
            self._failed(exc)
            return
        self._written()

    async def retry(self, run: Run, stopped: anyio.Event, every: float) -> None:
        """Until written (or the worker stops), try again every ``every`` seconds.

        A failure is told once; the worker's store outage tells the rest.
        """
        while self.pending and not stopped.is_set():
            with anyio.move_on_after(every):
                await stopped.wait()
            if stopped.is_set():
                return
            try:
                await run(function_publish(self.worker_id, self.declarations))
            except errors.StoreError as exc:
                self._failed(exc)
                continue
            self._written()

    def tell_if_none(self, modules: Sequence[str]) -> None:
        """Say, once the worker has started, that ``modules`` declare no job: a submit by name
        finds none of this worker's, and a newcomer who named a package whose ``__init__``
        imports nothing would otherwise learn it only from a refused submit. After the start,
        so that a worker that fails to start still says only why."""
        if modules and not self.declarations:
            self._events.emit(
                "no_jobs_declared",
                modules=",".join(modules),
                hint="submits by name find no job of this worker's (calls by path, mod:func, "
                "still run); declare jobs with @taskq.job, and name the modules that hold "
                "them: a package publishes only the jobs its __init__ imports",
            )

    def _failed(self, exc: errors.StoreError) -> None:
        if not self._told:
            self._told = True
            self._events.emit("publish_failed", worker=self.worker_id, error=str(exc))

    def _written(self) -> None:
        self.pending = False
        self._events.emit(
            "jobs_published",
            worker=self.worker_id,
            jobs=",".join(declaration.name for declaration in self.declarations),
        )
