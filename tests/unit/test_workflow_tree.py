"""The workflow tree of ``taskq workflow show``: each job once, references after, no recursion."""

from __future__ import annotations

import io
import sys

import pytest

from taskq.broker.records import JobEdge, JobState
from taskq.cli import state_colors, workflow_tree


def _edges(*pairs: tuple[int, int]) -> list[JobEdge]:
    return [JobEdge(parent_id=parent, child_id=child) for parent, child in pairs]


def test_a_fan_in_is_drawn_under_its_first_parent_and_referenced_under_the_others() -> None:
    lines = workflow_tree.drawn([1, 2, 3, 4], _edges((1, 4), (2, 4), (3, 4)), str)
    assert lines == ["1", "└─ 4", "2", "└─ 4 (see above)", "3", "└─ 4 (see above)"]


def test_a_chain_longer_than_the_recursion_limit_is_drawn() -> None:
    count = 5000
    lines = workflow_tree.drawn(range(count), _edges(*((n, n + 1) for n in range(count - 1))), str)
    assert len(lines) == count
    assert lines[-1].endswith(f"└─ {count - 1}")


def test_a_job_an_edge_names_but_no_longer_listed_is_still_drawn() -> None:
    # Job 1 was pruned: its child hangs from it, not loose.
    lines = workflow_tree.drawn([2], _edges((1, 2)), lambda job_id: f"job {job_id}")
    assert lines == ["job 1", "└─ job 2"]


def test_a_spawned_job_hangs_from_its_spawner_unless_it_waits_for_parents() -> None:
    # Job 1 spawned 2 and 3 while it ran, and 4 after both of them.
    edges = [
        JobEdge(parent_id=1, child_id=2, spawned=True),
        JobEdge(parent_id=1, child_id=3, spawned=True),
        JobEdge(parent_id=1, child_id=4, spawned=True),
        *_edges((2, 4), (3, 4)),
    ]
    lines = workflow_tree.drawn([1, 2, 3, 4], edges, str)
    assert lines == [
        "1",
        "├─ spawned 2",
        "│  └─ 4",
        "└─ spawned 3",
        "   └─ 4 (see above)",
    ]


@pytest.mark.parametrize(
    ("environment", "colored"),
    [({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False), ({"FORCE_COLOR": "1"}, True), ({}, False)],
)
def test_states_are_painted_only_for_a_terminal_or_when_forced(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], colored: bool
) -> None:
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # output read by a program
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert state_colors.wanted() is colored
    painted = state_colors.painted(JobState.DEAD, color=state_colors.wanted())
    assert painted == ("\x1b[1;31mdead\x1b[0m" if colored else "dead")
