"""A sandbox child's start: the control-group plan on its command line, and what it imports."""

from __future__ import annotations

import subprocess
import sys

from taskq.worker.sandbox.cgroups import CgroupPlan, Group


def test_a_plan_reads_back_from_a_childs_command_line_as_it_was_written() -> None:
    unified = Group("/sys/fs/cgroup/unified/taskq-12", 2)
    plan = CgroupPlan(
        pids=Group("/sys/fs/cgroup/pids/taskq-12", 1), memory=None, kill=unified, cpu=unified
    )
    assert CgroupPlan.from_json(plan.to_json()) == plan
    assert CgroupPlan.from_json(CgroupPlan().to_json()) == CgroupPlan()
    assert CgroupPlan.from_json(plan.to_json()).groups() == plan.groups()


def test_a_child_imports_no_msgspec_before_it_splits() -> None:
    # The keeper and the job process share what the child imported before the
    # split; the rest, msgspec first, is the job process's to import while its
    # keeper moves it into its control groups (``keeper.split``).
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, taskq.worker.sandbox.child; print('msgspec' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert imported.strip() == "False"
