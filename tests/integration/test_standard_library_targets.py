"""A function of Python's standard library is no job: refused at submit, never advised.

A worker runs every function of the modules it is given, for anyone who
submits; given ``os`` or ``builtins`` it would run ``os:system`` or
``builtins:exec``, which is what the shell and python-exec payloads each ask
a flag for. So no message of taskq's may lead a user there.
"""

from __future__ import annotations

import os
import os.path
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from taskq.broker.unserved import unserved_queue

ADVICE = "is a function of Python's standard library"


@pytest.fixture
def client(tmp_path: Path) -> taskq.Client:
    return taskq.Client(f"sqlite:///{tmp_path / 'store.db'}")


@pytest.mark.parametrize("function", [exec, print, os.system, os.path.join])
def test_a_standard_library_function_is_refused_and_nothing_is_written(
    client: taskq.Client, function: Callable[..., Any]
) -> None:
    with pytest.raises(errors.InvalidJob, match=ADVICE) as refused:
        client.submit(function, "x")
    assert refused.value.field == "target"
    assert "module of your own" in str(refused.value)
    assert client.list(taskq.JobQuery()) == []


def test_a_standard_library_name_is_not_advised_to_be_submitted_unchecked(
    client: taskq.Client,
) -> None:
    with pytest.raises(errors.UnknownFunction, match=ADVICE) as refused:
        client.submit("os:system", "true")
    assert "unchecked" not in str(refused.value)
    assert client.list(taskq.JobQuery()) == []


def test_a_waiting_standard_library_job_is_never_told_to_get_a_worker_of_its_module(
    client: taskq.Client,
) -> None:
    # Unchecked, it is written: the wait's note must not say "--modules os".
    handle = client.submit("os:system", "true", unchecked=True)
    note = unserved_queue([client.get(handle.id)], workers=[])
    assert note is not None
    assert ADVICE in note
    assert "--modules" not in note
    # A job of the user's own module still gets the worker to start.
    own = client.submit("lab.tasks:resize", "a.png", unchecked=True)
    assert "--modules lab.tasks" in (unserved_queue([client.get(own.id)], workers=[]) or "")
