"""A worker started while its cluster is down waits for it, as a running one rides it out.

A fleet's workers may start before their store, or while it has lost its
quorum: exiting then would leave the queue unserved once the store is back.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.rqlite_cluster import running_cluster
from tests.support.worker_process import WorkerFleet


@pytest.mark.rqlite
def test_a_worker_started_with_no_node_up_waits_and_starts_once_one_is(
    tmp_path: Path, workers: WorkerFleet
) -> None:
    with running_cluster(tmp_path / "cluster", size=1) as cluster:
        [node] = cluster.nodes
        cluster.kill_node(node, signal.SIGKILL)
        worker = workers.start(cluster.url, wait_started=False)
        said = worker.wait_for_event("store_unavailable", timeout=60)
        assert "refused" in str(said).lower(), said
        assert worker.running
        cluster.start_node(node)
        worker.wait_for_event("worker_started", timeout=60)
        assert worker.running
