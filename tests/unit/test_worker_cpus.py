"""The worker's ``cpus`` setting: parsing, checking against the machine, defaults."""

from __future__ import annotations

import os

import pytest

from taskq import errors
from taskq.worker.cpus import check_available, format_cpu_list, parse_cpu_list
from taskq.worker.settings import settings_from


@pytest.mark.parametrize(
    ("raw", "cpus"),
    [
        ("0", {0}),
        ("0-3,6", {0, 1, 2, 3, 6}),
        (" 2 , 0-1 ", {0, 1, 2}),
        ("3-3", {3}),
        ([1, 0, 1], {0, 1}),
    ],
)
def test_cpu_lists_parse(raw: object, cpus: set[int]) -> None:
    assert parse_cpu_list(raw) == cpus


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ("", "'' is not a CPU number"),
        ("0,,1", "'' is not a CPU number"),
        ("one", "'one' is not a CPU number"),
        ("3-1", "range '3-1' runs backwards"),
        ("-1", "'-1' is not a CPU number"),
        ([], "at least one CPU"),
        ([-2], "CPU numbers >= 0"),
        ([True], "must be a CPU list"),
        (1.5, "must be a CPU list"),
    ],
)
def test_bad_cpu_lists_are_named(raw: object, complaint: str) -> None:
    with pytest.raises(errors.ConfigError) as caught:
        parse_cpu_list(raw)
    assert complaint in str(caught.value)
    assert "cpus" in str(caught.value)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [({0}, "0"), ({0, 1, 2, 3, 6}, "0-3,6"), ({1, 3, 5}, "1,3,5"), ({4, 5, 7, 8}, "4-5,7-8")],
)
def test_cpu_lists_format_shortest(cpus: set[int], text: str) -> None:
    assert format_cpu_list(cpus) == text
    assert parse_cpu_list(text) == cpus


def test_cpus_outside_the_process_affinity_are_refused() -> None:
    beyond = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(errors.ConfigError) as caught:
        check_available(frozenset({0, beyond}))
    assert f"cpus {beyond} not available" in str(caught.value)
    assert format_cpu_list(os.sched_getaffinity(0)) in str(caught.value)


def test_concurrency_defaults_to_the_number_of_cpus_named() -> None:
    first = min(os.sched_getaffinity(0))
    settings = settings_from({"cpus": str(first)})
    assert settings.cpus == {first}
    assert settings.concurrency == 1
    assert settings_from({"cpus": [first], "concurrency": 4}).concurrency == 4
    assert settings_from({"cpus": [first]}, {"concurrency": 3}).concurrency == 3


def test_without_cpus_the_worker_is_not_pinned() -> None:
    assert settings_from({}).cpus is None
