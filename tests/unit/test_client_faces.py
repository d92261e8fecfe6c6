"""``Client`` and ``AsyncClient`` offer the same methods, with the same parameters.

The requests declared once in :mod:`taskq.broker.client.operations` are equal
by construction; the submits and the lifecycle are written for each client,
and this test fails on any drift between them.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from taskq.broker.client.client import AsyncClient, Client
from taskq.broker.client.faces import Operation, Paged
from taskq.broker.client.operations import JobQuery
from taskq.broker.ops.jobs import job_list
from taskq.broker.records import AttemptEnded, JobState, OutputEvent

# The async spelling of the lifecycle's names; every other name is the same in both.
_ASYNC_NAME = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}


def _public(cls: type) -> set[str]:
    lifecycle = {"__enter__", "__exit__", "__aenter__", "__aexit__"}
    return {name for name in dir(cls) if not name.startswith("_") or name in lifecycle}


def _shape(function: Callable[..., Any]) -> str:
    """The signature as text, a handle of either kind read as one."""
    return (
        str(inspect.signature(function))
        .replace("AsyncJobHandle", "JobHandle")
        .replace("AsyncWorkflowHandle", "WorkflowHandle")
    )


def _blocking_names() -> list[str]:
    return sorted(_public(Client))


def test_both_clients_have_the_same_public_names() -> None:
    assert {_ASYNC_NAME.get(name, name) for name in _public(Client)} == _public(AsyncClient)


@pytest.mark.parametrize("name", _blocking_names())
def test_each_method_has_the_same_signature_in_both(name: str) -> None:
    blocking = inspect.getattr_static(Client, name)
    awaiting = inspect.getattr_static(AsyncClient, _ASYNC_NAME.get(name, name))
    if isinstance(blocking, Operation | Paged):
        assert awaiting is blocking  # one declaration, read by both
        return
    if not callable(blocking) or awaiting is blocking:
        assert blocking is awaiting  # shared: ClientBase's, which asks nothing of the store
        return
    assert _shape(blocking) == _shape(awaiting)
    assert inspect.iscoroutinefunction(awaiting)
    assert not inspect.iscoroutinefunction(blocking)
    overloads = [_shape(f) for f in typing.get_overloads(blocking)]
    assert overloads == [_shape(f) for f in typing.get_overloads(awaiting)]


def test_a_job_query_is_what_job_list_takes() -> None:
    parameters = inspect.signature(job_list).parameters
    assert list(parameters) == list(JobQuery.__struct_fields__)
    for name in parameters:
        assert parameters[name].default == getattr(JobQuery(), name)


def test_an_operation_reads_as_a_method_of_each_kind(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    with Client(url) as client:
        assert not inspect.iscoroutinefunction(client.get)
        assert (
            str(inspect.signature(client.wait))
            == "(job_id: 'JobRef', *, timeout: 'float | None' = None) -> 'Job'"
        )
        assert client.schema_version() > 0

    async def check() -> None:
        async with AsyncClient(url) as awaiting:
            assert inspect.iscoroutinefunction(awaiting.get)
            assert awaiting.get.__doc__ == client.get.__doc__ == Client.get.__doc__
            assert await awaiting.schema_version() > 0

    anyio.run(check)


def test_a_paged_request_reads_as_an_iterator_of_each_kind(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    with Client(url) as client:
        job_id = client.submit("tests.support.jobs:echo", 1, unchecked=True).id
        client.cancel(job_id)
        assert list(client.output(job_id)) == [ENDED_UNRUN]

    async def read_async() -> list[OutputEvent]:
        async with AsyncClient(url) as client:
            return [event async for event in client.output(job_id)]

    assert anyio.run(read_async) == [ENDED_UNRUN]


ENDED_UNRUN = AttemptEnded(
    None,
    None,
    {"type": "Cancelled", "message": "cancelled by request while queued"},
    JobState.CANCELLED,
)
