"""Fixtures shared by every tier: stores of both kinds, and a real rqlite cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Store
from tests.support.rqlite_cluster import (
    QUIET_IDLE_ARGS,
    STORE_KINDS,
    RqliteCluster,
    running_cluster,
)

# The rqlite tier: run whole where rqlited is found, else reported as not run.
pytest_plugins = ["tests.support.rqlite_tier"]


@pytest.fixture(scope="session")
def rqlite_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RqliteCluster]:
    """One 3-node cluster for the session; tests that kill nodes start their own.

    Each pytest worker keeps one for its whole run, idle most of the time: quiet
    raft timings spare about 100 s of the suite's CPU (2026-12-03, 2 cores)."""
    shared = tmp_path_factory.mktemp("rqlite-shared")
    with running_cluster(shared, raft_timing=QUIET_IDLE_ARGS) as cluster:
        yield cluster


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store of each kind: a fresh SQLite file, or the shared cluster."""
    if request.param == "sqlite":
        opened = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    else:
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        opened = open_store(cluster.url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def table() -> str:
    """A table name no other test uses, so tests can share one cluster."""
    return f"t_{uuid.uuid4().hex[:12]}"
