"""The console on a live 3-node rqlite cluster: the leader, and the new one after a kill."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.formatting import Clock
from taskq.app.source import ConsoleSource
from taskq.app.widgets.tables import NodesTable
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.connect import open_store
from tests.support.rqlite_cluster import running_cluster
from tests.tui.waiting import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.rqlite]

REFRESH = 0.5


def _leaders(table: NodesTable) -> list[str]:
    return [
        table.cell_text(key, "id")
        for key in table.row_keys()
        if table.cell_text(key, "role") == "★ leader"
    ]


def _reachable(table: NodesTable, node_id: str) -> str | None:
    for key in table.row_keys():
        if table.cell_text(key, "id") == node_id:
            return table.cell_text(key, "reachable")
    return None


async def test_the_console_follows_the_leader_when_it_is_killed(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        store = open_store(cluster.url)
        app = ConsoleApp(
            ConsoleSource(AsyncClient(store=store, import_names=False)),
            refresh_seconds=REFRESH,
            clock=Clock(),
        )
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                nodes = app.screen.query_one(NodesTable)
                await wait_for(pilot, lambda: nodes.row_count == 3, "three nodes", timeout=20)
                await wait_for(
                    pilot, lambda: _leaders(nodes) == [leader.node_id], "the leader", timeout=20
                )
                assert all(_reachable(nodes, node.node_id) == "yes" for node in cluster.nodes)
                assert app.problem is None

                cluster.kill_node(leader, signal.SIGKILL)
                # A few refreshes: an election takes about a second with the test timeouts.
                await wait_for(
                    pilot,
                    lambda: len(_leaders(nodes)) == 1 and _leaders(nodes) != [leader.node_id],
                    "a new leader",
                    timeout=30,
                )
                await wait_for(
                    pilot,
                    lambda: _reachable(nodes, leader.node_id) == "NO",
                    "the killed node shown unreachable",
                    timeout=30,
                )
                new_leader = cluster.wait_for_leader()
                assert _leaders(nodes) == [new_leader.node_id]
                await wait_for(pilot, lambda: app.problem is None, "the banner gone", timeout=30)
        finally:
            await store.aclose()
