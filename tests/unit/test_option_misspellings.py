"""A misspelt option of ``taskq.job`` or ``options()`` is matched with ``client`` too.

``add.options(clinet=c)`` had no suggestion and ``taskq.job(clients=c)`` was
asked "did you mean limits?": ``client`` was listed but not matched. And
``taskq.job``'s list of options leaves out those it refuses (given per call).
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import square


def _refusal(declare: object) -> str:
    assert callable(declare)
    with pytest.raises(errors.InvalidJob) as refused:
        declare()
    return str(refused.value)


def test_a_misspelt_client_is_suggested() -> None:
    assert "(did you mean client?)" in _refusal(lambda: square.options(clinet=None))
    assert "(did you mean client?)" in _refusal(lambda: taskq.job(clients=None))


def test_taskq_job_lists_only_what_it_takes() -> None:
    said = _refusal(lambda: taskq.job(queu="q"))
    assert "(did you mean queue?)" in said
    listed = said.partition("the options are ")[2]
    assert "queue" in listed
    assert "after" not in listed
    assert "idempotency_key" not in listed


def test_options_lists_every_option() -> None:
    listed = _refusal(lambda: square.options(queu="q")).partition("the options are ")[2]
    assert "after" in listed
    assert "idempotency_key" in listed
