"""The mistakes job code makes first get an error that says what to write instead.

``taskq.Retry(after="10m")`` (a duration as text) and a plain call of a job
that reads ``taskq.current_job()`` (in a test, say) each fail with one line
naming the way to do it.
"""

from __future__ import annotations

import pytest

import taskq
import taskq.testing
from taskq.retry import MAX_DELAY_SECONDS


@pytest.mark.parametrize("after", ["10m", True, [60]])
def test_retry_after_that_is_not_a_number_says_it_takes_seconds(after: object) -> None:
    with pytest.raises(TypeError) as refused:
        taskq.Retry(after=after)  # type: ignore[arg-type]
    said = str(refused.value)
    assert said.startswith("Retry(after=...) takes seconds as a number")
    assert repr(after) in said
    assert "\n" not in said


@pytest.mark.parametrize("after", [-1, float("nan"), float("inf"), 10**400])
def test_retry_after_out_of_bounds_is_refused(after: float) -> None:
    with pytest.raises(ValueError, match=r"must be 0 to"):
        taskq.Retry(after=after)


def test_retry_after_within_bounds_is_kept() -> None:
    assert taskq.Retry(after=0).after == 0
    assert taskq.Retry(after=MAX_DELAY_SECONDS).after == MAX_DELAY_SECONDS
    assert taskq.Retry().after is None


def test_current_job_outside_a_job_names_as_job() -> None:
    with pytest.raises(RuntimeError) as refused:
        taskq.current_job()
    assert "only available inside a running job" in str(refused.value)
    assert "taskq.testing.as_job()" in str(refused.value)
    with taskq.testing.as_job(job_id=7):
        assert taskq.current_job().id == 7


def test_a_misspelt_field_of_a_retry_dict_is_named_with_the_one_meant() -> None:
    with pytest.raises(taskq.errors.InvalidJob) as refused:
        taskq.job(retry={"base": 5, "caps": 600})
    assert str(refused.value).startswith("retry has no field(s) caps (did you mean cap?);")
    assert refused.value.field == "retry"


def test_a_retry_dict_with_keys_of_several_types_is_refused_in_words() -> None:
    with pytest.raises(taskq.errors.InvalidJob, match=r"retry has no field\(s\) 1, bse"):
        taskq.job(retry={"bse": 5, 1: 2})
