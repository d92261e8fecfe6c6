"""A sandbox child's start: the control-group plan on its command line, and what it imports."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from taskq.worker.sandbox.cgroups import CgroupPlan, Group
from taskq.worker.sandbox.child import parse_arguments


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


def test_a_childs_command_line_reads_as_the_worker_writes_it() -> None:
    args = parse_arguments(
        ["pool", "--control-fd", "5", "--keeper-fd", "6", "--worker-pid", "77", "--marker", "ab"]
    )
    assert (args.mode, args.control_fd, args.keeper_fd, args.worker_pid) == ("pool", 5, 6, 77)
    assert args.marker == "ab"
    assert args.deadline_fd is None
    assert args.cgroups is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "the mode must be"),
        (["fork", "--control-fd", "5"], "the mode must be"),
        (["once", "--control-fd"], "has no value"),
        (["once", "--control-fd", "5", "--keeper-fd", "6"], "missing ['--worker-pid']"),
        (["once", "--control-fd", "5", "--keeper-fd", "6", "--worker-pid", "7", "--x", "1"], "--x"),
        (["once", "--control-fd", "five", "--keeper-fd", "6", "--worker-pid", "7"], "a number"),
    ],
)
def test_a_command_line_the_worker_would_not_write_stops_the_child(
    argv: list[str], says: str
) -> None:
    with pytest.raises(SystemExit, match=re.escape(says)):
        parse_arguments(argv)
