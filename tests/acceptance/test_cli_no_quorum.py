"""The operator's walkthrough: ``taskq`` on a 3-node cluster with 2 nodes killed.

The cluster is started by ``taskq dev cluster start`` (on loopback, HTTP
ports on a stride, each Raft port next to its HTTP port), and two nodes are
killed by their recorded pids. Reads print the survivor's copy with the note,
a write says the cluster has no leader and why, and ``taskq cluster`` names
the dead nodes by their ids with a short reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.dev.cluster import RqliteCluster
from taskq.dev.processes import wait_until
from tests.support.cli_runs import taskq as run_taskq
from tests.support.rqlite_cluster import free_base, kill_still_running, recorded_processes

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster

JOBS = "tests.support.jobs"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RqliteCluster]:
    directory = tmp_path / "cluster"
    env = {"TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", "")}
    start = ("dev", "cluster", "start", "--dir", str(directory), "--http-base", str(free_base(6)))
    try:
        started = run_taskq(*start, env=env)
        assert started.code == 0, started.err
        recorded = RqliteCluster.recorded(directory)
        assert recorded is not None
        yield recorded
    finally:
        kill_still_running(recorded_processes(directory))


def test_two_of_three_nodes_killed(cluster: RqliteCluster) -> None:
    with taskq.Client(cluster.url, submitter="acceptance") as client:
        job = client.submit(f"{JOBS}:add", 1, 2, queue="noquorum", unchecked=True)
    leader = cluster.wait_for_leader()
    survivor = next(node for node in cluster.nodes if node is not leader)
    query = f"SELECT id FROM jobs WHERE id = {job.id}"
    assert wait_until(lambda: bool(cluster.local_rows(survivor, query)), 30)
    dead = [node for node in cluster.nodes if node is not survivor]
    for node in dead:
        cluster.kill_node(node, signal.SIGKILL)
    # The survivor has noticed: it knows no leader (it stands as a candidate).
    assert wait_until(lambda: (cluster.raft_view(survivor) or ("", "?"))[1] == "", 30)

    listed = run_taskq("jobs", "--queue", "noquorum", "--json", store=cluster.url)
    assert listed.code == 0, listed
    assert [entry["id"] for entry in json.loads(listed.out)] == [job.id]
    assert f"read from {survivor.base_url}'s own copy, which may be stale" in listed.err

    submitted = run_taskq("submit", "--unchecked", f"{JOBS}:add", "1", "2", store=cluster.url)
    assert submitted.code == 1, submitted
    assert f"has no leader: 1 of 3 nodes answers ({survivor.http_addr}, " in submitted.err
    assert "and 2 refuse connections; an election needs a majority" in submitted.err
    assert "ConnectionRefused" not in submitted.err

    described = run_taskq("cluster", store=cluster.url)
    assert described.code == 1, described
    rows = {line.split()[0]: line for line in described.out.splitlines()[4:] if line.strip()}
    assert sorted(rows) == sorted(node.node_id for node in cluster.nodes), described.out
    for node in dead:
        assert re.search(
            rf"{node.base_url}\s+voter\s+no \(connection refused\)", rows[node.node_id]
        )
    assert survivor.base_url in rows[survivor.node_id]
    assert "Errno" not in described.out
