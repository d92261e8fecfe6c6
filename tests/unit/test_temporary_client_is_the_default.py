"""Inside ``taskq.testing.temporary_client`` a declared job's ``submit()`` goes to it.

A test that submits ``square.submit(3)`` meant the throwaway store; it went
to the store the machine names (``TASKQ_STORE``, the user's own), where
``run_due`` never ran it. And ``run_due`` of a shell job says why it is not
run inline, not that shell jobs are off "on this worker".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
import taskq.testing
from tests.support.workflow_jobs import square


@pytest.fixture
def own_default(tmp_path: Path) -> Iterator[taskq.Client]:
    with taskq.Client(f"sqlite://{tmp_path / 'own.db'}") as own:
        taskq.set_default_client(own)
        try:
            yield own
        finally:
            taskq.set_default_client(None)


def test_a_declared_job_submits_to_the_temporary_store(own_default: taskq.Client) -> None:
    with taskq.testing.temporary_client() as client:
        assert taskq.default_client() is client
        handle = square.submit(3)
        assert taskq.testing.run_due(client) == [handle.id]
        assert handle.result(timeout=0) == 9
    assert own_default.list() == []  # nothing went to the store set before


def test_the_default_before_comes_back_after_the_block(own_default: taskq.Client) -> None:
    with taskq.testing.temporary_client():
        pass
    assert taskq.default_client() is own_default


def test_a_default_opened_inside_the_block_is_closed_at_its_end(
    own_default: taskq.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKQ_STORE", f"sqlite://{tmp_path / 'named.db'}")
    with taskq.testing.temporary_client():
        taskq.set_default_client(None)
        opened = taskq.default_client()  # the block's own, over TASKQ_STORE
        assert opened.store_name.endswith("named.db")
    assert taskq.default_client() is own_default
    with pytest.raises(taskq.errors.StoreError, match="closed database"):
        opened.list()


def test_run_due_of_a_shell_job_says_it_runs_only_under_a_worker() -> None:
    with taskq.testing.temporary_client() as client:
        handle = client.submit_shell("true")
        taskq.testing.run_due(client)
        with pytest.raises(taskq.errors.JobFailed, match="shell jobs run only under a worker"):
            handle.result(timeout=0)
