"""A misspelt limit is refused with the limit meant, as other misspellings are."""

from __future__ import annotations

from pathlib import Path

import pytest

import taskq
from taskq import errors
from taskq.broker.limits import LimitsInvalid, parse_limits


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("memroy", "memory_bytes"),  # close to the limit's first word, its unit left out
        ("memory_mb", "memory_bytes"),
        ("cpu_secs", "cpu_seconds"),
        ("wall_seconds_", "wall_seconds"),
    ],
)
def test_a_misspelt_limit_names_the_one_meant(given: str, meant: str) -> None:
    with pytest.raises(LimitsInvalid) as refused:
        parse_limits({given: 1})
    assert str(refused.value).startswith(
        f"unknown limit(s) {given} (did you mean {meant}?); known: cpu_seconds,"
    )


def test_a_limit_close_to_none_is_refused_without_a_guess() -> None:
    with pytest.raises(LimitsInvalid) as refused:
        parse_limits({"zzzz": 1})
    assert str(refused.value).startswith("unknown limit(s) zzzz; known: cpu_seconds,")


def test_a_job_s_misspelt_limit_names_the_one_meant(tmp_path: Path) -> None:
    with (
        taskq.Client(f"sqlite://{tmp_path}/taskq.db") as client,
        pytest.raises(errors.InvalidJob) as refused,
    ):
        client.submit("m:f", unchecked=True, limits={"memroy": "2GiB"})
    assert str(refused.value).startswith(
        "limits: unknown limit(s) memroy (did you mean memory_bytes?); known: "
    )
