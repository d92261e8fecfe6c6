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
    lines = workflow_tree.laid_out([1, 2, 3, 4], _edges((1, 4), (2, 4), (3, 4))).lines(str)
    assert lines == ["1", "└─ 4", "2", "└─ 4 (see above)", "3", "└─ 4 (see above)"]


def test_a_chain_longer_than_the_recursion_limit_is_drawn() -> None:
    count = 5000
    lines = workflow_tree.laid_out(
        range(count), _edges(*((n, n + 1) for n in range(count - 1)))
    ).lines(str)
    assert len(lines) == count
    assert lines[-1].endswith(f"└─ {count - 1}")


def test_a_job_an_edge_names_but_no_longer_listed_is_still_drawn() -> None:
    # Job 1 was pruned: its child hangs from it, not loose.
    lines = workflow_tree.laid_out([2], _edges((1, 2))).lines(lambda job_id: f"job {job_id}")
    assert lines == ["job 1", "└─ job 2"]


def test_a_spawned_job_hangs_from_its_spawner_unless_it_waits_for_parents() -> None:
    # Job 1 spawned 2 and 3 while it ran, and 4 after both of them.
    edges = [
        JobEdge(parent_id=1, child_id=2, spawned=True),
        JobEdge(parent_id=1, child_id=3, spawned=True),
        JobEdge(parent_id=1, child_id=4, spawned=True),
        *_edges((2, 4), (3, 4)),
    ]
    lines = workflow_tree.laid_out([1, 2, 3, 4], edges).lines(str)
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


def test_siblings_past_the_most_drawn_stand_as_one_line_and_are_named_left_out() -> None:
    # Roots 1 to 5 all lead to 9; 6 and 7 lead to 8, which only they reach.
    edges = _edges((1, 9), (2, 9), (3, 9), (4, 9), (5, 9), (6, 8), (7, 8))
    layout = workflow_tree.laid_out(range(1, 10), edges, most_siblings=2)
    assert layout.lines(str, lambda hidden: f"+{list(hidden)}") == [
        "1",
        "└─ 9",
        "2",
        "└─ 9 (see above)",
        "+[3, 4, 5, 6, 7]",
    ]
    assert layout.left_out == {3, 4, 5, 6, 7, 8}
    children = workflow_tree.laid_out([1, 2, 3, 4], _edges((1, 2), (1, 3), (1, 4)), most_siblings=2)
    assert children.lines(str) == ["1", "├─ 2", "├─ 3", "└─ ... 1 more"]
    assert children.left_out == {4}
    assert workflow_tree.laid_out([1, 2, 3, 4], _edges((1, 2), (1, 3))).left_out == set()


def test_the_layout_names_the_jobs_drawn_before_any_line_is_made() -> None:
    # A fan-out of 30 (2 to 31) from 1 into 32: the command reads only the jobs drawn.
    edges = _edges(*((1, n) for n in range(2, 32)), *((n, 32) for n in range(2, 32)))
    layout = workflow_tree.laid_out(range(1, 33), edges, most_siblings=20)
    assert layout.drawn == [1, 2, 32, *range(3, 22)]
    asked: list[int] = []
    layout.lines(lambda job_id: asked.append(job_id) or str(job_id))
    assert asked == layout.drawn
    assert layout.left_out == set(range(22, 32))
