"""``map`` over tuples of arguments (Celery's ``starmap``) says how to spread them.

``add.map([(1, 2), (3, 4)])`` passes each tuple as ``add``'s first argument;
the refusal said only "missing a required argument: 'y'".
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import add


def _refusal(items: list[object]) -> str:
    with pytest.raises(errors.InvalidJob) as refused:
        add.map(items)
    assert refused.value.field == "args"
    return str(refused.value)


def test_a_tuple_item_points_to_a_group_of_steps() -> None:
    said = _refusal([(1, 2), (3, 4)])
    assert "add.map passes each item as the first argument; item 0 is (1, 2) (a tuple)" in said
    assert "taskq.group(*(add.step(*call) for call in items))" in said


def test_a_dict_item_points_to_keyword_steps() -> None:
    said = _refusal([{"x": 1, "y": 2}, {"x": 3}])
    assert "taskq.group(*(add.step(**call) for call in items))" in said


def test_the_group_it_points_to_is_built() -> None:
    flow = taskq.group(*(add.step(*call) for call in [(1, 2), (3, 4)]))
    assert len(flow) == 2


def test_a_map_of_single_arguments_is_unchanged() -> None:
    assert len(add.map([1, 2], y=5)) == 2
