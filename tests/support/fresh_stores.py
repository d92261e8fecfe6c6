"""A store of each kind that holds nothing yet: a new SQLite file, or a cluster of its own.

The session's shared cluster always holds other tests' data, so a test that
needs an empty cluster (a restore, a migration from scratch, a schema from
the past) starts one; one node is enough unless the test needs replicas.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.rqlite_cluster import RqliteCluster, running_cluster


@contextmanager
def fresh_store(kind: str, root: Path, *, nodes: int = 1) -> Iterator[str]:
    """The URL of an empty store of ``kind`` (``sqlite`` or ``rqlite``) under ``root``."""
    with fresh_cluster(kind, root, nodes=nodes) as cluster:
        yield f"sqlite://{root / 'fresh.db'}" if cluster is None else cluster.url


@contextmanager
def fresh_cluster(kind: str, root: Path, *, nodes: int = 1) -> Iterator[RqliteCluster | None]:
    """A cluster of its own for ``rqlite`` (stopped on the way out); None for ``sqlite``."""
    root.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        yield None
        return
    with running_cluster(root / "fresh-cluster", size=nodes) as cluster:
        yield cluster
