"""``await`` of a handle says what to await instead, in one line.

In a coroutine, ``await resize.submit(...)`` (a blocking client's handle)
points to ``taskq.AsyncClient``; ``await handle`` of an async client's handle
points to ``await handle.result(...)``. Python alone says only that the object
"can't be used in 'await' expression".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import taskq

SQUARE = "tests.support.workflow_jobs:square"


def _awaited(make: Callable[[], Awaitable[Any]]) -> str:
    async def main() -> None:
        await make()

    with pytest.raises(TypeError) as refused:
        anyio.run(main)
    said = str(refused.value)
    assert "\n" not in said
    return said


def test_awaiting_a_blocking_client_s_handles_points_to_the_async_client(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        job = client.submit(SQUARE, 2)
        pipeline = client.submit_workflow(taskq.step(SQUARE, 3))
        said = _awaited(lambda: job)  # type: ignore[arg-type,return-value]
        assert said.startswith("JobHandle is not awaitable")
        assert "handle = await aclient.submit(job, ...)" in said
        said = _awaited(lambda: pipeline)  # type: ignore[arg-type,return-value]
        assert said.startswith("WorkflowHandle is not awaitable")
        assert "await aclient.submit_workflow(flow)" in said


def test_awaiting_an_async_handle_itself_points_to_its_result(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"

    async def main() -> list[str]:
        said = []
        async with taskq.AsyncClient(url) as aclient:
            for handle in [
                await aclient.submit(SQUARE, 2),
                await aclient.submit_workflow(taskq.step(SQUARE, 3)),
            ]:
                try:
                    await handle  # type: ignore[misc]
                except TypeError as exc:
                    said.append(str(exc))
        return said

    job, pipeline = anyio.run(main)
    assert job == (
        "AsyncJobHandle is not awaitable itself: await handle.result(timeout=...) waits for the job"
    )
    assert pipeline.startswith("AsyncWorkflowHandle is not awaitable itself")
