"""The sandbox each slot runs its jobs in: made, warmed up and closed as slots come and go.

In pool isolation each slot has a ``PoolSandbox`` of its own (a pool child
runs one job at a time); in process isolation every slot shares one
``Sandbox``, which starts a fresh child per job and keeps nothing between.

A worker starts one pool child before anything else (``first_children``).
The other slots start theirs later (``start_the_rest``): on a machine of few
cores, an interpreter starting beside the first job takes CPU from that job
and from its report, which is when the worker's first result is written.
Until its child has started, a slot takes no job: the claimed jobs go to
the slot that is ready.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from taskq.worker.sandbox.child_process import ChildProcess, ChildSetup
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from taskq.worker.settings import WorkerSettings

# The longest the slots whose child did not start with the worker wait for
# its first report before starting theirs: a slot that could run a job waits
# that much longer at start when no report comes soon.
REST_OF_POOL_AFTER_SECONDS = 0.1


class SlotSandboxes:
    """The sandboxes of a worker's slots, one entry per slot."""

    def __init__(
        self,
        settings: WorkerSettings,
        preparer: JobPreparer,
        setup: ChildSetup,
        started: Sequence[ChildProcess] = (),
    ) -> None:
        """``started``: pool children started with the worker, one for each of the first slots."""
        self._preparer = preparer
        self._setup = setup
        self._recycle_after = settings.pool_recycle_after
        self._shared = (
            Sandbox(preparer=preparer, setup=setup) if settings.isolation == "process" else None
        )
        waiting = list(started)
        self.in_use = [
            self._new(waiting.pop(0) if waiting else None) for _ in range(settings.min_slots)
        ]
        # The slots whose pool child did not start with the worker: they take
        # jobs once theirs has, after ``start_the_rest``.
        self._not_started = self.in_use[len(started) :] if self._shared is None else []
        self._rest_may_start = anyio.Event()

    def _new(self, started: ChildProcess | None = None) -> Sandbox:
        if self._shared is not None:
            return self._shared
        return PoolSandbox(
            preparer=self._preparer,
            setup=self._setup,
            max_jobs_per_child=self._recycle_after,
            started=started,
        )

    def distinct(self) -> list[Sandbox]:
        return list({id(sandbox): sandbox for sandbox in self.in_use}.values())

    async def ready(self, sandbox: Sandbox) -> None:
        """Wait until the slot of ``sandbox`` may take jobs: its child has started.

        At once for a child started with the worker, for slots added later
        (``made_ready`` starts their children first), and in process isolation.
        """
        if not any(waiting is sandbox for waiting in self._not_started):
            return
        await self._rest_may_start.wait()
        await sandbox.warm_up()
        self._not_started = [waiting for waiting in self._not_started if waiting is not sandbox]

    def start_the_rest(self) -> None:
        """Let the slots whose child did not start with the worker start theirs now."""
        self._rest_may_start.set()

    async def made_ready(self, count: int) -> list[Sandbox]:
        """``count`` new sandboxes for new slots, their children started (not yet in use).

        If a child cannot start, those started are closed and the error raised.
        """
        sandboxes = [self._new() for _ in range(count)]
        try:
            async with anyio.create_task_group() as warming:
                for sandbox in sandboxes:
                    warming.start_soon(sandbox.warm_up)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close_unused(sandboxes)
            raise
        return sandboxes

    async def close_unused(self, sandboxes: list[Sandbox]) -> None:
        """Close sandboxes no slot uses (any but the shared one)."""
        for sandbox in sandboxes:
            if sandbox is not self._shared:
                await sandbox.aclose()

    async def slot_left(self, sandbox: Sandbox) -> None:
        """The slot running in ``sandbox`` has gone: close it, unless other slots share it."""
        self.in_use.remove(sandbox)
        await self.close_unused([sandbox])

    async def aclose(self) -> None:
        for sandbox in self.distinct():
            await sandbox.aclose()
