"""A client's request shows what it answers, not the plan its declaration builds.

Each request is declared (:mod:`taskq.broker.client.operations`) as a method
returning its plan, ``GroupOp[Job]`` or ``Pages[OutputEvent]``; a user calling
``client.get`` gets a ``Job``, so ``help()`` and an IDE must say ``-> 'Job'``.
"""

from __future__ import annotations

import inspect
import pydoc
from pathlib import Path

import pytest

import taskq

# Each request's answer on both clients: a plain request answers the same on each
# (awaited on AsyncClient); a paged one is an iterator there, an async one here.
ANSWERS = {
    "get": ("Job", "Job"),
    "wait": ("Job", "Job"),
    "list": ("list[Job]", "list[Job]"),
    "cancel": ("CancelResult", "CancelResult"),
    "retry": ("RetryResult", "RetryResult"),
    "pause": ("None", "None"),
    "served_queues": ("set[str]", "set[str]"),
    "schema_version": ("int", "int"),
    "add_schedule": ("ScheduleAdded", "ScheduleAdded"),
    "workflows": ("list[WorkflowInfo]", "list[WorkflowInfo]"),
    "output": ("Iterator[OutputEvent]", "AsyncIterator[OutputEvent]"),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_each_request_returns_its_answer_type(name: str) -> None:
    blocking, awaiting = ANSWERS[name]
    assert inspect.signature(getattr(taskq.Client, name)).return_annotation == blocking
    assert inspect.signature(getattr(taskq.AsyncClient, name)).return_annotation == awaiting


def test_no_request_shows_the_plan_it_builds() -> None:
    for client in (taskq.Client, taskq.AsyncClient):
        shown = pydoc.render_doc(client, renderer=pydoc.plaintext)
        for plan in ("GroupOp", "Pages[", "OutputReader"):
            assert plan not in shown, (client.__name__, plan)


def test_help_of_a_request_ends_with_its_answer() -> None:
    shown = pydoc.render_doc(taskq.AsyncClient.get, renderer=pydoc.plaintext)
    assert "async get(self, job_id: 'JobRef') -> 'Job'" in shown


def test_a_bound_request_keeps_its_parameters_and_answer(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path}/taskq.db") as client:
        signature = inspect.signature(client.list)
        assert str(signature) == "(query: 'JobQuery | None' = None) -> 'list[Job]'"
        assert list(client.list()) == []
