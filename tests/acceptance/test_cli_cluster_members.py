"""``taskq dev cluster add|remove|replace`` and ``taskq cluster remove``, as a user runs them.

Bad input is one line and changes nothing; the steps themselves, during a
drain, are judged in tests/integration/test_rqlite_membership.py.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path

import pytest

from tests.support.cli_runs import taskq
from tests.support.rqlite_cluster import free_base


def test_removing_a_node_of_the_embedded_store_is_one_line_and_creates_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "taskq.db"
    ran = taskq("cluster", "remove", "node1", store=f"sqlite://{store}")
    assert ran.code == 2
    assert ran.err.strip().splitlines() == [
        f"taskq: error: sqlite://{store} is an embedded SQLite store: it has no nodes to remove"
    ]
    assert not store.exists()


@pytest.mark.rqlite
@pytest.mark.timeout(180)
def test_dev_cluster_adds_removes_and_replaces_nodes(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    options = ("--dir", str(directory))
    env = {"TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", "")}
    base = free_base(10)
    try:
        started = taskq("dev", "cluster", "start", *options, "--http-base", str(base), env=env)
        assert started.code == 0, started.err
        for step in (("add",), ("remove", "node1"), ("replace", "node2")):
            ran = taskq("dev", "cluster", *step, *options, env=env)
            assert ran.code == 0, ran.err
        url = (directory / "url").read_text().strip()
        assert url == "rqlite://" + ",".join(f"127.0.0.1:{base + n}" for n in (4, 6, 8))
        for wrong in (
            ("dev", "cluster", "remove", "node9", *options),
            ("cluster", "remove", "node9"),
        ):
            refused = taskq(*wrong, store=url if wrong[0] == "cluster" else None, env=env)
            assert refused.code == 1
            assert refused.err.strip().splitlines() == [
                "taskq: error: the cluster has no node 'node9'; its nodes: node3, node4, node5"
            ]
        described = taskq("cluster", "--json", store=url, env=env)
        assert described.code == 0, described.err
        nodes = described.json()["nodes"]
        assert sorted(node["id"] for node in nodes) == ["node3", "node4", "node5"]
        assert all(node["reachable"] for node in nodes)
        assert sorted(path.name for path in directory.glob("removed-*")) == [
            "removed-node1",
            "removed-node2",
        ]
    finally:
        taskq("dev", "cluster", "stop", *options, env=env)
        for pidfile in directory.glob("node*/pid"):
            with suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
