"""A Celery user's first habits (``.delay``, ``.s``, ``a | b``, ``flow.apply_async()``,
``result.get()``) are met with taskq's words for them, while a misspelt name is still
Python's plain ``AttributeError``, with its own suggestion."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import taskq
import taskq.testing
from tests.support.worker_process import REPO
from tests.support.workflow_jobs import square, total


@pytest.fixture
def client() -> Iterator[taskq.Client]:
    with taskq.testing.temporary_client(submitter="test") as opened:
        yield opened


def _missing(owner: Any, name: str) -> AttributeError:
    with pytest.raises(AttributeError) as raised:
        getattr(owner, name)
    return raised.value


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("delay", "square.submit(...) submits a call"),
        ("apply_async", "square.options(queue=..., run_at=...).submit(...)"),
        ("s", "square.step(...) is a call as a step of a workflow"),
        ("si", "its arguments are its own"),
        ("chunks", "square.map(items)"),
    ],
)
def test_a_declared_job_names_its_way_for_a_celery_habit(name: str, said: str) -> None:
    error = _missing(square, name)
    assert str(error).startswith(f"'DeclaredJob' object has no attribute {name!r} (a Celery habit?")
    assert said in str(error)
    assert (error.name, error.obj) == (name, square)


def test_a_misspelt_name_gets_pythons_words_and_suggestion() -> None:
    error = _missing(square, "sumbit")
    assert str(error) == "'DeclaredJob' object has no attribute 'sumbit'"
    # Python prints its suggestion when the error reaches the top, as a user sees it.
    script = "from tests.support.workflow_jobs import square\nsquare.sumbit"
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert ran.returncode == 1
    assert ran.stderr.splitlines()[-1].endswith("Did you mean: 'submit'?")


def test_a_flow_is_submitted_by_the_client_and_chained_with_then() -> None:
    flow = square.map([1, 2]).then(total)
    for name in ("apply_async", "delay", "submit"):
        assert "client.submit_workflow(flow)" in str(_missing(flow, name))
    for chained in (lambda: flow | total.step(), lambda: square | flow):
        with pytest.raises(TypeError, match=r"chained with \.then\(\): a\.then\(b\), not a \| b"):
            chained()


def test_a_job_handle_names_result_and_cancel(client: taskq.Client) -> None:
    handle = client.submit(square, 3)
    assert "handle.result(timeout=...)" in str(_missing(handle, "get"))
    assert "handle.cancel()" in str(_missing(handle, "revoke"))
    assert "options(after=[handle])" in str(_missing(handle, "then"))
    assert str(_missing(handle, "reslut")) == "'JobHandle' object has no attribute 'reslut'"


def test_a_workflow_handle_names_result_and_cancel(client: taskq.Client) -> None:
    pipeline = client.submit_workflow(square.map([1, 2]).then(total))
    for handle in (pipeline, client.workflow_handle(pipeline.id)):
        assert "pipeline.result(timeout=...)" in str(_missing(handle, "get"))
        assert "pipeline.cancel()" in str(_missing(handle, "revoke"))
        assert str(_missing(handle, "reslut")).endswith("object has no attribute 'reslut'")
