"""The errors taskq serve answers with are names of ``taskq.errors``, and come back as such."""

from __future__ import annotations

import pytest

from taskq import errors
from taskq.broker.client import problem_types
from taskq.server import problems

SERVER_REFUSALS = ("Unauthorized", "Forbidden", "WrongState", "ScheduleNotFound", "BadRequest")


@pytest.mark.parametrize("kind", [kind for kind, _ in problems._STATUS], ids=lambda k: k.__name__)
def test_every_error_the_server_answers_with_is_a_name_of_taskq_errors(kind: type) -> None:
    assert getattr(errors, kind.__name__, None) is kind


@pytest.mark.parametrize("name", [*SERVER_REFUSALS, "TooLarge"])
def test_the_old_names_in_problem_types_are_the_same_classes(name: str) -> None:
    assert getattr(problem_types, name) is getattr(errors, name)


@pytest.mark.parametrize("name", [*SERVER_REFUSALS, "TooLarge"])
def test_a_problem_names_its_class_in_taskq_errors(name: str) -> None:
    problem = problem_types.Problem(f"urn:taskq:problem:{name}", "title", 400, "what went wrong")
    error = problem_types.error_of(problem)
    assert type(error) is getattr(errors, name)
    assert str(error) == "what went wrong"
