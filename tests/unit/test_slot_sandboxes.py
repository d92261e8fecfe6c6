"""Which slots may take jobs at a worker's start: those whose pool child has started."""

from __future__ import annotations

from typing import cast

import anyio
import pytest

from taskq.worker.sandbox.child_process import ChildProcess, ChildSetup
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from taskq.worker.settings import WorkerSettings
from taskq.worker.slot_sandboxes import SlotSandboxes

pytestmark = pytest.mark.anyio

# Never started: the sandboxes' warm_up is replaced, and no job runs.
STARTED_WITH_THE_WORKER = cast(ChildProcess, object())


@pytest.fixture
def warmed(monkeypatch: pytest.MonkeyPatch) -> list[Sandbox]:
    """The sandboxes whose child was started, in order, in place of starting one."""
    started: list[Sandbox] = []

    async def warm_up(self: PoolSandbox) -> None:
        started.append(self)

    monkeypatch.setattr(PoolSandbox, "warm_up", warm_up)
    return started


def slot_sandboxes(isolation: str = "pool") -> SlotSandboxes:
    settings = WorkerSettings(queues=("q",), concurrency=3, isolation=isolation)
    return SlotSandboxes(
        settings, JobPreparer(), ChildSetup(env={}), started=[STARTED_WITH_THE_WORKER]
    )


async def test_only_the_slot_whose_child_started_with_the_worker_is_ready_at_once(
    warmed: list[Sandbox],
) -> None:
    sandboxes = slot_sandboxes()
    first, second, third = sandboxes.in_use
    ready: list[Sandbox] = []

    async def wait_ready(sandbox: Sandbox) -> None:
        await sandboxes.ready(sandbox)
        ready.append(sandbox)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            for sandbox in (first, second, third):
                tasks.start_soon(wait_ready, sandbox)
            await anyio.wait_all_tasks_blocked()
            assert ready == [first]
            assert warmed == []
            sandboxes.start_the_rest()
    assert set(ready) == {first, second, third}
    # Each of the others started its child before its slot counted as ready.
    assert set(warmed) == {second, third}


async def test_slots_added_later_and_process_isolation_do_not_wait(warmed: list[Sandbox]) -> None:
    sandboxes = slot_sandboxes()
    with anyio.fail_after(5):
        added = await sandboxes.made_ready(2)
        assert set(warmed) == set(added)
        for sandbox in added:
            await sandboxes.ready(sandbox)
        shared = slot_sandboxes("process")
        for sandbox in shared.in_use:
            await shared.ready(sandbox)
