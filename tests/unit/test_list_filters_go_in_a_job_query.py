"""``client.list(state="failed")`` says its filters go in a ``taskq.JobQuery``.

Python's own refusal named the keyword only ("got an unexpected keyword
argument 'state'"); the client's says where the filter belongs, with the call
to write, on the store and over ``taskq serve`` alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import taskq


@pytest.fixture(params=["store", "http"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[taskq.Client]:
    # Over HTTP the refusal comes before any request: no server needs to listen.
    url = f"sqlite://{tmp_path}/taskq.db" if request.param == "store" else "http://127.0.0.1:9"
    with taskq.Client(url) as made:
        yield made


def test_a_filter_given_to_list_names_the_job_query_it_goes_in(client: taskq.Client) -> None:
    with pytest.raises(TypeError) as refused:
        client.list(state="failed")  # type: ignore[call-arg]
    assert str(refused.value) == (
        'list() takes its filters in a taskq.JobQuery: client.list(taskq.JobQuery(state="failed"))'
    )


def test_each_filter_given_is_in_the_call_to_write(client: taskq.Client) -> None:
    with pytest.raises(
        TypeError, match=r"taskq\.JobQuery\(state=taskq\.JobState\.FAILED, limit=5\)"
    ):
        client.list(state=taskq.JobState.FAILED, limit=5)  # type: ignore[call-arg]


def test_a_misspelt_filter_is_named_with_the_one_meant(client: taskq.Client) -> None:
    with pytest.raises(TypeError) as refused:
        client.list(stat="failed")  # type: ignore[call-arg]
    message = str(refused.value)
    assert message.startswith("list() has no parameter stat (did you mean state?)")
    assert "taskq.JobQuery" in message
    assert "\n" not in message


def test_the_async_client_refuses_them_alike(tmp_path: Path) -> None:
    async def listed() -> None:
        async with taskq.AsyncClient(f"sqlite://{tmp_path}/taskq.db") as client:
            await client.list(queue="images")  # type: ignore[call-arg]

    with pytest.raises(TypeError, match=r'client\.list\(taskq\.JobQuery\(queue="images"\)\)'):
        anyio.run(listed)


def test_a_query_is_still_taken_by_name(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path}/taskq.db") as client:
        assert client.list(query=taskq.JobQuery(state="failed")) == []
