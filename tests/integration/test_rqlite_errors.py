"""rqlite's error channels, provoked on real clusters and read by the store."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.rqlite_store import RqliteStore
from taskq.broker.store import Consistency, Statement
from taskq.broker.store_url import parse_store_url
from tests.support.rqlite_cluster import RqliteCluster, RqliteNode, running_cluster


def _store(url: str) -> RqliteStore:
    target = parse_store_url(url)
    assert not isinstance(target, Path)
    return RqliteStore(target, display_url=url)  # type: ignore[arg-type]


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
        json.dumps([{"username": "taskq", "password": "s3cret", "perms": ["all"]}])
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
            with pytest.raises(errors.StoreAuthError):
                bad.execute([Statement("INSERT INTO t VALUES (1)")])
            with pytest.raises(errors.StoreAuthError):
                bad.query(Statement("SELECT a FROM t"))
            bad.close()
