"""rqlite's error channels, provoked on real clusters and read by the store."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import Consistency, Statement
from taskq.broker.stores.store_url import RqliteTarget, parse_store_url
from tests.support.rqlite_cluster import RqliteCluster, RqliteNode, running_cluster

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster


def _target(url: str) -> RqliteTarget:
    target = parse_store_url(url)
    assert isinstance(target, RqliteTarget)
    return target


def _store(url: str) -> RqliteStore:
    return RqliteStore(_target(url), display_url=url)


def test_write_on_a_stranded_leader_has_an_unknown_outcome(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        store = _store(f"rqlite://{leader.http_addr}?retries=2&timeout=5")
        store.execute([Statement("CREATE TABLE t (a INTEGER)")])
        for node in cluster.nodes:
            if node is not leader:
                cluster.kill_node(node, signal.SIGKILL)
        # The leader accepts the write but cannot commit it without a quorum,
        # then steps down: rqlite answers with a top-level error.
        with pytest.raises(errors.OutcomeUnknown, match="leadership lost"):
            store.execute([Statement("INSERT INTO t VALUES (1)")])
        store.close()


def test_no_leader_is_unavailable_but_stale_reads_still_answer(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        survivor = next(node for node in cluster.nodes if node is not leader)
        setup = _store(cluster.url)
        setup.execute(
            [Statement("CREATE TABLE t (a INTEGER)"), Statement("INSERT INTO t VALUES (1)")]
        )
        setup.close()
        _wait_until(lambda: cluster.local_rows(survivor, "SELECT a FROM t") == [{"a": 1}])
        for node in cluster.nodes:
            if node is not survivor:
                cluster.kill_node(node, signal.SIGKILL)
        _wait_until(lambda: cluster.leader() is None and _knows_no_leader(cluster, survivor))
        local = _store(f"rqlite://{survivor.http_addr}?retries=2&timeout=3")

        with pytest.raises(errors.StoreUnavailable, match="leader not found"):
            local.execute([Statement("INSERT INTO t VALUES (2)")])
        with pytest.raises(errors.StoreUnavailable):
            local.query(Statement("SELECT a FROM t"), consistency=Consistency.LINEARIZABLE)
        stale = local.query(Statement("SELECT a FROM t"), consistency=Consistency.NONE)
        assert stale == [{"a": 1}]
        local.close()

        # Asked for, a read that finds no leader falls back to a survivor's own copy.
        told: list[str] = []
        everyone = RqliteStore(
            _target(f"{cluster.url}?retries=2&timeout=3"), on_stale_read=told.append
        )
        assert everyone.query(Statement("SELECT a FROM t")) == [{"a": 1}]
        assert told == [survivor.base_url]
        # The dead nodes are still shown, by the addresses the URL named them by.
        described = {node.address: node for node in everyone.nodes()}
        assert set(described) == {node.base_url for node in cluster.nodes}
        assert described[survivor.base_url].reachable
        assert described[survivor.base_url].id == survivor.node_id
        assert not any(node.leader for node in described.values())
        everyone.close()


def test_a_dead_node_keeps_its_address_while_a_leader_remains(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        dead = next(node for node in cluster.nodes if node is not leader)
        cluster.kill_node(dead, signal.SIGKILL)
        store = _store(cluster.url)
        _wait_until(lambda: sum(node.reachable for node in store.nodes()) == 2)
        nodes = {node.id: node for node in store.nodes()}
        assert nodes[dead.node_id].address == dead.base_url
        assert not nodes[dead.node_id].reachable
        assert "not an http(s) base URL" not in nodes[dead.node_id].error
        assert nodes[leader.node_id].leader
        store.close()


def _knows_no_leader(cluster: RqliteCluster, node: RqliteNode) -> bool:
    status = cluster.status(node) or {}
    store = status.get("store", {})
    leader = store.get("leader", {}) if isinstance(store, dict) else {}
    return not (isinstance(leader, dict) and leader.get("addr"))


def _wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.1)


def test_credentials_are_checked(tmp_path: Path) -> None:
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(
        json.dumps(
            [
                {"username": "taskq", "password": "s3cret", "perms": ["all"]},
                {"username": "reader", "password": "r3ad", "perms": ["query", "status"]},
            ]
        )
    )
    with running_cluster(
        tmp_path / "cluster",
        size=1,
        extra_args=["-auth", str(auth_file)],
        credentials=("taskq", "s3cret"),
    ) as cluster:
        address = cluster.nodes[0].http_addr
        good = _store(f"rqlite://taskq:s3cret@{address}")
        good.execute([Statement("CREATE TABLE t (a INTEGER)")])
        assert good.query(Statement("SELECT count(*) AS n FROM t")) == [{"n": 0}]
        good.close()
        for url in (f"rqlite://{address}", f"rqlite://taskq:wrong@{address}"):
            bad = _store(url + "?retries=1")
            with pytest.raises(errors.StoreAuthError) as refused:
                bad.execute([Statement("INSERT INTO t VALUES (1)")])
            assert not str(refused.value).rstrip(")").endswith(": ")
            with pytest.raises(errors.StoreAuthError):
                bad.query(Statement("SELECT a FROM t"))
            bad.close()
        # rqlite answers 401 to a missing permission as well: told apart all the same.
        reader = _store(f"rqlite://reader:r3ad@{address}?retries=1")
        assert reader.query(Statement("SELECT count(*) AS n FROM t")) == [{"n": 0}]
        with pytest.raises(errors.StorePermissionDenied, match=r"user 'reader'.*'execute'"):
            reader.execute([Statement("INSERT INTO t VALUES (1)")])
        reader.close()
