"""Fixtures of the acceptance tier: real ``taskq-worker`` processes against a store file."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

import taskq
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.worker_process import WorkerFleet

_FLEET = pytest.StashKey[WorkerFleet]()


@pytest.fixture
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WorkerFleet]:
    """Starts ``taskq-worker`` processes; every one is stopped by pid after the test."""
    with WorkerFleet(tmp_path / "workers") as fleet:
        request.node.stash[_FLEET] = fleet
        yield fleet


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In a module marked ``both_stores``, a test of ``store_url`` runs on each kind of store."""
    both = metafunc.definition.get_closest_marker("both_stores")
    if both is not None and "store_url" in metafunc.fixturenames:
        metafunc.parametrize("store_url", STORE_KINDS, indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite store file of this test's own; or, given "rqlite", the tier's cluster."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url


@pytest.fixture
def client(store_url: str) -> Iterator[taskq.Client]:
    with taskq.Client(store_url, submitter="acceptance") as opened:
        yield opened


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Show every worker's log tail under a failed test."""
    report = yield
    fleet = item.stash.get(_FLEET, None)
    if report.failed and fleet is not None and fleet.workers:
        report.sections.append(("taskq-worker logs", fleet.describe()))
    return report
