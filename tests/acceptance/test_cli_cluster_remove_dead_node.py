"""``taskq cluster remove`` of a node that died: what to do next, as an operator replacing it
needs to hear it (never the old id again on an empty directory; keep the voters odd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_runs import ok
from tests.support.rqlite_cluster import running_cluster


@pytest.mark.rqlite
@pytest.mark.timeout(120)
def test_removing_a_dead_node_says_how_to_replace_it(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        lost = next(node for node in cluster.nodes if node is not leader)
        cluster.kill_node(lost)
        url = cluster.url
        ran = ok("cluster", "remove", lost.node_id, store=url)
        lines = ran.out.splitlines()
        assert lines[0] == (
            f"removed {lost.node_id} from {url}; stop its rqlited if it still runs and delete "
            "its data directory: it may join again only under a new node id"
        )
        assert lines[-1] == (
            "2 voters left: add a node with a new id (rqlited -node-id NEW -join ...) to keep "
            "their number odd; see docs/stores.md, 'Changing the cluster'"
        )
