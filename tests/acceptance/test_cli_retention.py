"""``taskq retention``, run as the real command against both stores.

The retention is one row for the whole store and the rqlite cluster is
shared, so each test puts back what it found.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import Retention
from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command
from tests.support.rqlite_cluster import STORE_KINDS

DAY = 86400.0


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of each kind; the retention it had is put back afterwards."""
    if request.param == "sqlite":
        named = f"sqlite://{tmp_path / 'taskq.db'}"
    else:
        named = str(request.getfixturevalue("rqlite_cluster").url)
    with taskq.Client(named) as client:
        found = client.retention()
        yield named
        client.set_retention(succeeded=found.succeeded_seconds, failed=found.failed_seconds)


def test_retention_shows_and_sets_each_kind_and_never_keeps_a_kind(url: str) -> None:
    assert ok("retention", store=url).out == (
        "succeeded jobs: pruned 7d after they end\n"
        "failed, dead and cancelled jobs: pruned 7d after they end\n"
    )
    assert ok("retention", "--failed", "90d", store=url).out == (
        "succeeded jobs: pruned 7d after they end\n"
        "failed, dead and cancelled jobs: pruned 90d after they end\n"
    )
    assert ok("retention", "--succeeded", "never", "--json", store=url).json() == {
        "succeeded_seconds": None,
        "failed_seconds": 90 * DAY,
    }
    with taskq.Client(url) as client:
        assert client.retention() == Retention(None, 90 * DAY)
    shown = ok("retention", store=url).out
    assert "succeeded jobs: kept until pruned by hand" in shown
    pruned = ok("prune", store=url).out
    assert "past the store's retention (succeeded never, failed 90d)" in pruned


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--failed", "0", "must be positive"),
        ("--failed", "5x", "'5x' is not a duration"),
        ("--succeeded", "forever", "'never'"),
        # Read as seconds, it would prune at once what was meant to be kept for days.
        ("--succeeded", "7", "'7' needs a unit: 7d, 7h, 7m or 7s"),
    ],
)
def test_a_bad_retention_is_one_error_and_changes_nothing(
    url: str, flag: str, value: str, fragment: str
) -> None:
    before = ok("retention", "--json", store=url).json()
    one_error_line(taskq_command("retention", flag, value, store=url), 2, fragment)
    assert ok("retention", "--json", store=url).json() == before


def test_a_prune_by_a_bare_number_is_refused_and_prunes_nothing(url: str) -> None:
    with taskq.Client(url) as client:
        handle = client.submit("tests.support.jobs:echo", 1, unchecked=True)
        client.cancel(handle.id)
    one_error_line(taskq_command("prune", "--older-than", "30", store=url), 2, "'30' needs a unit")
    assert ok("jobs", "--json", store=url).json()[0]["id"] == handle.id
