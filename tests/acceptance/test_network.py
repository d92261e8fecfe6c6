"""Jobs drain across a LAN of network namespaces, with a LAN's round trip on every link.

Three rqlite nodes, two worker hosts of two workers each and a client host,
each in a network namespace this test makes, on one bridge; every
connection to a node crosses a forwarder holding each chunk for half of a
2 ms round trip (:mod:`bench.network_cluster`). The client host submits jobs
one by one; every one must succeed once, with its right result. Skipped,
with the reason, where network namespaces cannot be made (no root, no
CAP_NET_ADMIN, no iproute2). Everything made is gone afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.netns import Lan, NamespacesUnavailable, leftover_namespaces
from bench.network import probe
from bench.network_cluster import NetworkCluster

pytestmark = pytest.mark.rqlite

JOBS = 60


def _lan() -> Lan:
    try:
        return Lan()
    except NamespacesUnavailable as error:
        # A part the test needs: missing, the test fails, saying which.
        pytest.fail(f"network namespaces cannot be made here (root and ip are needed): {error}")


def test_jobs_drain_across_namespaces_with_a_round_trip(tmp_path: Path) -> None:
    lan = _lan()
    prefix = lan.prefix
    with lan, NetworkCluster(lan, tmp_path, worker_hosts=2, per_host=2, rtt_ms=2.0) as cluster:
        cluster.start_store()
        assert probe(cluster, "ready", "--timeout", "60", timeout=90) == {"ready": True}
        fleet = cluster.start_workers(timeout=60)
        checked = probe(cluster, "check", "--jobs", str(JOBS), "--timeout", "120", timeout=180)
        assert all(worker.running for worker in fleet.workers), fleet.describe()
    assert checked["submitted"] == JOBS
    assert checked["found"] == JOBS
    assert checked["succeeded_once"] == JOBS, checked
    assert leftover_namespaces(prefix) == []


def _fail_inside(lan: Lan) -> None:
    with lan:
        lan.add("one")
        lan.add("two")
        assert len(leftover_namespaces(lan.prefix)) == 3  # the switch and two hosts
        raise RuntimeError("a failure inside the LAN")


def test_the_lan_is_removed_after_a_failure() -> None:
    lan = _lan()
    with pytest.raises(RuntimeError, match="inside"):
        _fail_inside(lan)
    assert leftover_namespaces(lan.prefix) == []
