"""A killed worker's control groups do not stay for good: the next worker removes them.

A worker removes its ``taskq-<pid>`` groups when it stops; one killed outright
cannot, and on a machine whose workers are killed now and then they pile up
(``cgroups.sweep_left_behind``).
"""

from __future__ import annotations

import os
from pathlib import Path

from taskq.worker.sandbox import cgroups
from tests.support.worker_process import WorkerFleet, wait_until

# Past the largest pid Linux hands out (pid_max is at most 2**22): no process has it.
NO_PROCESS = 2**22 + 1


def test_a_killed_workers_groups_are_removed_by_the_next_worker(
    workers: WorkerFleet, store_url: str
) -> None:
    # The test process's own groups, beside the workers' it starts: a live
    # pid's, which must stay.
    plan = cgroups.create(os.getpid())
    assert plan.groups(), "no control groups here: the containment tests need them too"
    try:
        left = [Path(group.parent).parent / f"taskq-{NO_PROCESS}" for group in plan.groups()]
        for path in left:
            # As a killed worker leaves them: its group, and a keeper's inside.
            (path / "keeper-1").mkdir(parents=True, exist_ok=True)
        worker = workers.start(store_url)
        assert wait_until(lambda: not any(path.exists() for path in left), timeout=30)
        assert all(os.path.isdir(group.parent) for group in plan.groups())
        # The worker's own groups stay while it runs.
        assert all(
            (Path(group.parent).parent / f"taskq-{worker.pid}").is_dir() for group in plan.groups()
        )
    finally:
        cgroups.remove(plan)
