"""Fixtures of the integration tier: the URL of a store of each kind, for tests that
start processes of their own (each opens the store by URL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file's URL, or the shared cluster's."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url
