"""``@taskq.job(idempotency_key=...)`` is refused: a key names one submit, not a job.

Declared, every submit of the job would carry the same key: the first would be
written, each later one with the same call answered with that first job, and
one with other arguments refused as a conflict. So it goes per call, in
``options()``, as ``after`` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import taskq
from taskq import errors
from tests.support.workflow_jobs import square


def test_a_declared_idempotency_key_is_refused_naming_options() -> None:
    with pytest.raises(errors.InvalidJob) as refused:
        taskq.job(idempotency_key="nightly")
    assert refused.value.field == "idempotency_key"
    assert "in the job's .options(...)" in str(refused.value)


def test_after_is_still_refused_as_declared() -> None:
    with pytest.raises(errors.InvalidJob, match="names jobs already submitted"):
        taskq.job(after=[1])


def test_a_key_given_per_call_still_deduplicates(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        first = square.options(idempotency_key="k", client=client).submit(3)
        again = square.options(idempotency_key="k", client=client).submit(3)
        assert first.id == again.id
