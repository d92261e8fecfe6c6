"""A flow given to ``submit`` (or ``submit_many``) points to ``submit_workflow``.

``client.submit(square.step(2))`` said "target must look like
'package.module:function', got <Flow ...>".
"""

from __future__ import annotations

from pathlib import Path

import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import square


def test_submit_of_a_flow_says_submit_workflow(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        for submit in (
            lambda: client.submit(square.step(2)),
            lambda: client.submit_many(square.map([1, 2]), [()]),
        ):
            with pytest.raises(errors.InvalidJob) as refused:
                submit()
            assert str(refused.value).startswith("submit takes one job, not a flow (<Flow of")
            assert "client.submit_workflow(flow)" in str(refused.value)
            assert refused.value.field == "target"
        assert client.list() == []
