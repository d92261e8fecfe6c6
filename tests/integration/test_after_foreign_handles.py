"""A job's handle knows its client's store: ``after=`` refuses the handle of another store's
job, whose id names another job or none here, in one error naming both stores, by every
way of submitting, with nothing written; a handle of the same store is taken through any
client of it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import taskq
from taskq import errors
from taskq.dev.server import ServerProcess, token_of
from tests.support.declared_store import declaration, names, serving
from tests.support.workflow_jobs import add, square, total

TOTAL = "tests.support.workflow_jobs:total"


@pytest.fixture
def here(tmp_path: Path) -> Iterator[taskq.Client]:
    with taskq.Client(f"sqlite://{tmp_path / 'here.db'}", submitter="test") as client:
        client.submit(square, 1)  # job 1 here too: an id the other store's handle shares
        yield client


@pytest.fixture
def there(tmp_path: Path) -> Iterator[taskq.Client]:
    with taskq.Client(f"sqlite://{tmp_path / 'there.db'}", submitter="test") as client:
        yield client


def _refusal(folder: Path, job_id: int) -> str:
    """The refusal of job ``job_id`` of there.db given to a client of here.db, in ``folder``."""
    return (
        f"after: job {job_id} is a job of sqlite://{folder / 'there.db'} (its handle's store), "
        f"but this client submits to sqlite://{folder / 'here.db'}, where job {job_id} is "
        "another job or none: a job waits only on jobs of its own store"
    )


# Each way a job is submitted with parents: the submitting client, a parent's handle.
SUBMITS: dict[str, Callable[[taskq.Client, Any], object]] = {
    "submit by name": lambda client, parent: client.submit(TOTAL, after=[parent]),
    "submit unchecked": lambda client, parent: client.submit(TOTAL, after=[parent], unchecked=True),
    "submit a declared job": lambda client, parent: client.submit(total.options(after=[parent])),
    "declared .submit": lambda client, parent: total.options(
        client=client, after=[parent]
    ).submit(),
    "submit_spec": lambda client, parent: client.submit_spec(
        taskq.call_spec(TOTAL, after=[parent])
    ),
    "submit_python": lambda client, parent: client.submit_python(
        "def f():\n    return 1\n", "f", after=[parent]
    ),
    "submit_shell": lambda client, parent: client.submit_shell("true", after=[parent]),
    "submit_many of specs": lambda client, parent: client.submit_many(
        [taskq.call_spec(TOTAL), taskq.call_spec(TOTAL, after=[parent])]
    ),
    "submit_many of calls by name": lambda client, parent: client.submit_many(
        [taskq.NamedCall(TOTAL, (), {"after": [parent]})]
    ),
    "submit_many of a declared job": lambda client, parent: client.submit_many(
        total.options(after=[parent]), [(), ()]
    ),
}
# Each kind of handle a client gives for a job: of a submit, a batch, a workflow.
HANDLES: dict[str, Callable[[taskq.Client], Any]] = {
    "submit": lambda client: client.submit(square, 2),
    "submit_many": lambda client: client.submit_many(square, [(2,)])[0],
    "a workflow's jobs()": lambda client: client.submit_workflow(square.step(2)).jobs()[0],
}


@pytest.mark.parametrize("handle_of", HANDLES.values(), ids=HANDLES.keys())
@pytest.mark.parametrize("submit", SUBMITS.values(), ids=SUBMITS.keys())
def test_a_handle_of_another_stores_job_is_refused_naming_both_and_one_of_this_store_taken(
    here: taskq.Client,
    there: taskq.Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    submit: Callable[[taskq.Client, Any], object],
    handle_of: Callable[[taskq.Client], Any],
) -> None:
    foreign = handle_of(there)
    assert foreign.id == 1  # this store's job 1 is another job
    with pytest.raises(errors.InvalidJob) as refused:
        submit(here, foreign)
    assert (str(refused.value), refused.value.field) == (_refusal(tmp_path, 1), "after")
    assert [job.id for job in here.list()] == [1]  # nothing written
    assert here.workflows() == []
    # The same store through another client, its URL written another way, is this store.
    monkeypatch.chdir(tmp_path)
    with taskq.Client("sqlite://here.db?synchronous=normal", submitter="test") as again:
        own = handle_of(again)
        submit(here, own)
    later = [job.id for job in here.list() if job.id > own.id]
    parents = [parent for job_id in later for parent, _ in here.relatives(job_id).parents]
    assert set(parents) == {own.id}


def test_a_sqlite_file_is_one_store_however_its_path_is_written(
    here: taskq.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "folder-link").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "file-link.db").symlink_to(tmp_path / "here.db")
    monkeypatch.chdir(tmp_path / "sub")
    mine = here.submit(square, 2)
    for url in (
        f"sqlite://{tmp_path}/sub/../here.db",  # through ..
        "sqlite://../here.db",  # relative
        f"sqlite://{tmp_path}/folder-link/here.db",  # through a linked folder
        f"sqlite://{tmp_path}/file-link.db",  # a link to the file
    ):
        with taskq.Client(url, submitter="test") as again:
            theirs = again.submit(square, 3)
            # Each client takes the other's handles: both are of this one file.
            child = again.submit(total.options(after=[mine]))
            back = here.submit(total.options(after=[theirs]))
            assert (
                again.store_name
                == here.store_name
                == f"sqlite://{(tmp_path / 'here.db').resolve()}"
            )
        assert [parent for parent, _ in here.relatives(child.id).parents] == [mine.id]
        assert [parent for parent, _ in here.relatives(back.id).parents] == [theirs.id]


def test_a_flow_whose_step_waits_on_another_stores_job_is_refused_naming_the_step(
    here: taskq.Client, there: taskq.Client, tmp_path: Path
) -> None:
    foreign = there.submit(square, 2)
    flows = [
        add.step(1).then(total.options(after=[foreign]).step()),
        add.step(1).then(taskq.step(TOTAL, after=[foreign])),
        taskq.group(add.step(1), taskq.step(TOTAL, after=[foreign], unchecked=True)),
    ]
    for flow in flows:
        with pytest.raises(errors.InvalidJob) as refused:
            here.submit_workflow(flow)
        assert str(refused.value) == f"step total(): {_refusal(tmp_path, foreign.id)}"
        assert refused.value.field == "after"
    assert [job.id for job in here.list()] == [1]
    assert here.workflows() == []
    # A spawn's store is its worker's, unknown to the job: the flow goes with plain ids.
    spawned = flows[0].submission()
    assert msgspec.json.decode(msgspec.json.encode(spawned.jobs[1]))["after"] == [foreign.id]


def test_the_async_client_refuses_an_async_handle_of_another_store_and_takes_this_ones(
    tmp_path: Path,
) -> None:
    here_url, there_url = (f"sqlite://{tmp_path / name}" for name in ("here.db", "there.db"))

    async def main() -> None:
        async with (
            taskq.AsyncClient(here_url) as here,
            taskq.AsyncClient(there_url) as there,
        ):
            mine = await here.submit(square, 1)
            foreign = await there.submit(square, 1)
            flow = add.step(1).then(total.options(after=[foreign]).step())
            for submit in (
                here.submit(TOTAL, after=[foreign]),
                here.submit_many([taskq.call_spec(TOTAL, after=[foreign])]),
                here.submit_workflow(flow),
            ):
                with pytest.raises(errors.InvalidJob, match=f"job 1 is a job of {there_url} "):
                    await submit
            assert [job.id for job in await here.list()] == [mine.id]
            with taskq.Client(here_url) as blocking:
                of_this_store = blocking.submit(square, 2)
            later = await here.submit(TOTAL, after=[mine, of_this_store])
            parents = (await here.relatives(later.id)).parents
            assert [parent for parent, _ in parents] == [mine.id, of_this_store.id]

    anyio.run(main)


@pytest.fixture
def over_http(served: tuple[str, ServerProcess]) -> Iterator[taskq.Client]:
    with taskq.Client(served[1].url, token=token_of("tester")) as client:
        yield client


def test_over_http_a_handle_of_the_server_is_taken_and_one_of_its_file_is_another_stores(
    served: tuple[str, ServerProcess], over_http: taskq.Client
) -> None:
    name, queue = names()
    with taskq.Client(served[0]) as on_the_file:
        serving(on_the_file, "w1", [queue], declaration(name, queue=queue))
        parent = over_http.submit(name, "in.txt")
        # By name the server resolves the call: the handle goes in the body as its id.
        child = over_http.submit(name, "out.txt", after=[parent])
        assert over_http.relatives(child.id).parents[0][0] == parent.id
        # The same file's jobs, but a client of it and one of taskq serve are told apart.
        mine = on_the_file.submit(name, "local.txt")
        refused: list[tuple[Callable[[], object], str]] = [
            (lambda: over_http.submit(name, "x", after=[mine]), served[0]),
            (lambda: over_http.submit(name, "x", after=[mine], unchecked=True), served[0]),
            (
                lambda: over_http.submit_many([taskq.call_spec(name, ["x"], after=[mine])]),
                served[0],
            ),
            (
                lambda: over_http.submit_many([taskq.NamedCall(name, ("x",), {"after": [mine]})]),
                served[0],
            ),
            (lambda: over_http.submit_workflow(taskq.step(name, "x", after=[mine])), served[0]),
            (lambda: on_the_file.submit(name, "x", after=[parent]), served[1].url),
        ]
        for submit, store in refused:
            with pytest.raises(errors.InvalidJob, match=f"is a job of {re.escape(store)} "):
                submit()
        assert len(on_the_file.list(taskq.JobQuery(queue=queue))) == 3
