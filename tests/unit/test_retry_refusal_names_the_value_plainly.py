"""A retry policy's refused number is named as its neighbours name values: plainly."""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.retry import parse_retry


def test_a_field_that_is_not_a_number_names_the_value_plainly() -> None:
    with pytest.raises(errors.InvalidJob) as refused:
        parse_retry({"factor": "x"})
    assert str(refused.value) == "retry: factor must be a number, got x"


def test_it_reads_as_the_out_of_bounds_refusal_beside_it() -> None:
    with pytest.raises(errors.InvalidJob) as refused:
        taskq.RetryPolicy(base=-1)
    assert str(refused.value).startswith("retry: base must be from 0 to ")
    assert str(refused.value).endswith(", got -1")
