"""A worker started while its cluster has no leader waits for it, as a running one rides it out;
one whose store's addresses nothing listens at stops at once, saying so
(``test_worker_lifecycle``).

A quorum lost, or an election under way, ends when nodes come back: exiting
then would leave the queue unserved once the store is back.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.rqlite_cluster import running_cluster
from tests.support.worker_process import WorkerFleet


@pytest.mark.rqlite
def test_a_worker_started_without_a_quorum_waits_and_starts_once_there_is_one(
    tmp_path: Path, workers: WorkerFleet
) -> None:
    with running_cluster(tmp_path / "cluster", size=3) as cluster:
        first, second, third = cluster.nodes
        # Two of three gone: the third answers, and no leader can be elected.
        for node in (first, second):
            cluster.kill_node(node, signal.SIGKILL)
        worker = workers.start(cluster.url, wait_started=False)
        said = worker.wait_for_event("store_unavailable", timeout=60)
        assert "leader" in str(said), said
        assert worker.running
        cluster.start_node(first)
        worker.wait_for_event("worker_started", timeout=60)
        assert worker.running
        assert third.alive
