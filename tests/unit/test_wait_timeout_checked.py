"""A wait's ``timeout`` that is not seconds from 0 is refused at once, naming it.

``handle.result(timeout="30")`` failed deep in the wait with "unsupported
operand type(s) for +: 'float' and 'str'", and ``timeout=-1`` timed out at
once saying the job was "still queued after -1 s".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors

SQUARE = "tests.support.workflow_jobs:square"


@pytest.mark.parametrize("timeout", ["30", -1, True])
@pytest.mark.parametrize(
    "wait",
    [
        lambda client, timeout: client.submit(SQUARE, 2).result(timeout=timeout),
        lambda client, timeout: client.wait(client.submit(SQUARE, 2), timeout=timeout),
        lambda client, timeout: client.submit_workflow(taskq.step(SQUARE, 2)).result(timeout),
        lambda client, timeout: client.submit_workflow(taskq.step(SQUARE, 2)).wait(timeout),
    ],
    ids=["handle.result", "client.wait", "workflow.result", "workflow.wait"],
)
def test_a_timeout_that_is_not_seconds_is_refused(
    tmp_path: Path, wait: Callable[[taskq.Client, Any], Any], timeout: object
) -> None:
    with (
        taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client,
        pytest.raises(errors.InvalidJob) as refused,
    ):
        wait(client, timeout)
    assert refused.value.field == "timeout"
    assert str(refused.value).startswith("timeout is the seconds to wait")
    assert repr(timeout) in str(refused.value)


def test_a_timeout_of_zero_still_asks_once(tmp_path: Path) -> None:
    with (
        taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client,
        pytest.raises(errors.ResultTimeout, match="still queued after 0 s"),
    ):
        client.submit(SQUARE, 2).result(timeout=0)
