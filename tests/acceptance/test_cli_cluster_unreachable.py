"""``taskq cluster`` on a store of which no node answers says so, not that it has no leader."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from taskq.dev.server import running_server
from tests.support.cli_runs import one_error_line, taskq
from tests.support.rqlite_cluster import running_cluster


def _closed_port() -> int:
    """A port free a moment ago, closed again: nothing listens there."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        port: int = held.getsockname()[1]
    return port


def test_no_node_answering_is_said_as_such() -> None:
    port = _closed_port()
    url = f"rqlite://127.0.0.1:{port}"
    ran = taskq("cluster", store=url)
    said = one_error_line(ran, 1, f"no node of {url} answers (see REACHABLE)")
    assert "leader" not in said
    assert f"http://127.0.0.1:{port}" in ran.out
    assert "ConnectionRefusedError" in ran.out


@pytest.mark.rqlite
def test_a_taskq_serve_reaching_no_node_of_its_store_is_said_as_such(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")  # no tokens: open, on loopback
    with (
        running_cluster(tmp_path / "cluster", size=1) as cluster,
        running_server(cluster.url, config, tmp_path / "serve.log") as server,
    ):
        cluster.kill_node(cluster.nodes[0], signal.SIGKILL)
        ran = taskq("cluster", store=server.url)
    said = one_error_line(ran, 1, f"{server.url} reaches no node of its store (see REACHABLE)")
    assert "leader" not in said
