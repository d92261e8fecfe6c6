"""A refused step of a workflow is named by its call over HTTP too, as on the store.

``taskq serve`` names a workflow's job by its position in the body
(``job 1: ...``); the Python client over HTTP sent a flow, whose caller
wrote steps, not positions: its error names the step, in the same words as
a client on the store that the server serves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import taskq
from taskq import errors
from taskq.dev.server import ServerProcess, token_of
from tests.support.declared_store import declaration, names, serving


@pytest.fixture
def clients(served: tuple[str, ServerProcess]) -> Iterator[tuple[taskq.Client, taskq.Client]]:
    """A client on the served store, and one over HTTP."""
    url, server = served
    with (
        taskq.Client(url, submitter="tester") as on_store,
        taskq.Client(server.url, token=token_of("tester")) as over_http,
    ):
        on_store.declarations.seconds = 0.0
        yield on_store, over_http


def _refusals(clients: tuple[taskq.Client, ...], flow: taskq.Flow) -> list[errors.InvalidJob]:
    """What each client raises for ``flow``, which it must refuse."""
    refused = []
    for client in clients:
        with pytest.raises(errors.InvalidJob) as caught:
            client.submit_workflow(flow)
        refused.append(caught.value)
    return refused


def test_a_name_no_worker_declares_is_named_by_its_step(
    clients: tuple[taskq.Client, taskq.Client],
) -> None:
    name, queue = names()
    serving(clients[0], "w1", [queue], declaration(name, queue=queue))
    misspelt = name.replace("count_words", "count_word")
    flow = taskq.step(name, "a.txt").then(taskq.step(misspelt, "b.txt"))
    said = f"step count_word('b.txt'): no worker has declared {misspelt}; did you mean {name}?"
    for refused in _refusals(clients, flow):
        assert isinstance(refused, errors.UnknownFunction)
        assert str(refused).startswith(said), refused
        assert refused.field == "target"
    assert clients[0].list(taskq.JobQuery(queue=queue)) == []


def test_arguments_a_step_refuses_say_the_same_over_both(
    clients: tuple[taskq.Client, taskq.Client],
) -> None:
    name, queue = names()
    serving(clients[0], "w1", [queue], declaration(name, queue=queue))
    # Long enough that the step's name is cut short, as a flow cuts it.
    flow = taskq.group(taskq.step(name, "a.txt"), taskq.step(name, "x" * 80, 2))
    on_store, over_http = _refusals(clients, flow)
    assert str(over_http) == str(on_store)
    assert str(over_http).startswith(f"step count_words('{'x' * 43}...): {name}(path: str")
    assert over_http.field == on_store.field == "args"
