"""A worker's children, started first thing: its pool children, and with them the module check.

A worker's start-up counts towards its first jobs' wait, and most of it is
Python processes starting: the worker's own imports (its loop, the store's
drivers), and each pool child's. So the pool children start before the
worker imports its heavy parts, and the two overlap. The first pool child
imports the worker's ``--modules`` as it starts, as every pool child does,
and reports how that went (``module_check``): the check costs no process of
its own. In process isolation, where no child outlives a job, a child of its
own imports them, as before.

What every child starts with (the jobs' environment, the lease deadline
their keepers hold them to, the control groups) is made here too, once, and
handed to the worker that ``factory.build_worker`` builds, with the start turn
the worker holds while it starts (``start_turns``).
"""

from __future__ import annotations

import os
import sys

from taskq.worker.module_check import ModuleCheck
from taskq.worker.sandbox import cgroups
from taskq.worker.sandbox.cgroups import CgroupPlan
from taskq.worker.sandbox.child_process import ChildProcess, ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.start_turns import StartTurn


class FirstChildren:
    """The children a worker starts before its event loop, and what they start with.

    ``take_pool`` hands the pool children to the worker; until then
    ``close`` stops them (a worker that stops before it works).
    """

    def __init__(self, settings: WorkerSettings, start_turn: StartTurn) -> None:
        self.start_turn = start_turn
        """Given back once the worker has started (``Worker.run``), or by :meth:`close`."""
        self.deadline = LeaseDeadline(
            lease_seconds=settings.lease_seconds, margin_seconds=settings.lease_margin_seconds
        )
        self.cgroup_plan: CgroupPlan = cgroups.create(os.getpid())
        env = job_environment(os.environ, settings.env_passthrough)
        self.setup = ChildSetup(
            env=env,
            deadline=self.deadline,
            cgroups=self.cgroup_plan,
            modules=tuple(settings.modules),
            import_path=tuple(sys.path),
        )
        self._pool: list[ChildProcess] = []
        if settings.isolation != "pool":
            self.module_check = (
                ModuleCheck.in_own_child(settings.modules, import_path=sys.path, env=env)
                if settings.modules
                else ModuleCheck.none()
            )
            return
        # One: the first jobs need no more, and on a machine of few cores the
        # others would take CPU from this one and from the worker's start. The
        # worker starts them once its first report is written
        # (``SlotSandboxes.start_the_rest``).
        # The hard limits of a pool child are the worker's maximums (``JobPreparer.worker_max``).
        ceiling = settings.max_limits
        if not settings.modules:
            self._pool.append(ChildProcess.start("pool", self.setup, ceiling=ceiling))
            self.module_check = ModuleCheck.none()
            return
        read_fd, write_fd = os.pipe()
        # From this thread, at once: the spawning thread would be one more
        # import (concurrent.futures, logging) before the child is on its way.
        first = ChildProcess.start("pool", self.setup, ceiling=ceiling, report_fd=write_fd)
        self.module_check = ModuleCheck.in_pool_child(settings.modules, read_fd, first)
        self._pool.append(first)

    def take_pool(self) -> list[ChildProcess]:
        """The pool children, now the worker's to watch and to stop."""
        pool, self._pool = self._pool, []
        return pool

    def close(self) -> None:
        """Stop the children not taken, and undo what was made for them (blocking)."""
        for child in self.take_pool():
            child.close()
        cgroups.remove(self.cgroup_plan)
        self.deadline.close()
        self.start_turn.give_back()
