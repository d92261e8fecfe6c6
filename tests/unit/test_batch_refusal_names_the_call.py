"""A batch of calls of a function names the call refused, as a batch by name does.

``square.submit_many([(2,), ()])`` said only what was missing, not which of
the calls; ``client.submit_many("pkg.mod:f", ...)`` said ``entry 2 of the
batch (position 1)``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import square


@pytest.mark.parametrize(
    "submit",
    [
        lambda client: square.options(client=client).submit_many([(2,), ()]),
        lambda client: client.submit_many(square, [(2,), {"y": 3}]),
        lambda client: client.submit_many(square.function, [(2,), ("three", 4)]),
    ],
    ids=["declared submit_many", "client submit_many", "plain function"],
)
def test_the_refused_call_is_named(tmp_path: Path, submit: Callable[[taskq.Client], Any]) -> None:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        with pytest.raises(errors.InvalidJob) as refused:
            submit(client)
        assert str(refused.value).startswith("entry 2 of the batch (position 1): ")
        assert refused.value.field == "args"
        assert client.list() == []  # nothing written
