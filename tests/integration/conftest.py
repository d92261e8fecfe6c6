"""Fixtures of the integration tier: the URL of a store of each kind, for tests that
start processes of their own (each opens the store by URL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taskq.broker.client.connect import open_store
from taskq.dev.server import ServerProcess, running_server, token_of, write_server_config
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file's URL, or the shared cluster's."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'taskq.db'}"
    cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
    return cluster.url


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ServerProcess]]:
    """A ``taskq serve`` on a free loopback port over a SQLite file, and that file's URL."""
    root = tmp_path_factory.mktemp("served")
    url = f"sqlite://{root / 'taskq.db'}"
    open_store(url).close()
    config = write_server_config(root / "server.toml", {"tester": ["admin"], "reader": ["read"]})
    with running_server(url, config, root / "serve.log") as server:
        yield url, server


@pytest.fixture
def api(served: tuple[str, ServerProcess]) -> Iterator[httpx.Client]:
    """An HTTP client of :func:`served`, with the token of its admin ``tester``."""
    headers = {"Authorization": f"Bearer {token_of('tester')}"}
    with httpx.Client(base_url=served[1].url, headers=headers, timeout=30) as client:
        yield client
