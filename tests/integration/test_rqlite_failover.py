"""Killing the leader of a real 3-node cluster while writes stream through the store."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Consistency, Statement
from tests.support.rqlite_cluster import running_cluster

WRITES_AFTER_KILL = 50

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster


def test_writes_resume_after_the_leader_is_killed(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster") as cluster:
        store = open_store(cluster.url)
        store.execute([Statement("CREATE TABLE acked (k INTEGER PRIMARY KEY, at REAL)")])
        insert = "INSERT INTO acked (k, at) VALUES (:k, :at) ON CONFLICT (k) DO NOTHING"
        acknowledged: list[tuple[int, float]] = []
        killed_at: list[float] = []
        stop = threading.Event()
        failures: list[BaseException] = []

        def stream() -> None:
            key = 0
            try:
                while not stop.is_set():
                    key += 1
                    # Idempotent by its key, so the store may resend it after
                    # an unknown outcome; the caller never handles failover.
                    store.execute(
                        [Statement(insert, {"k": key, "at": time.time()})], idempotent=True
                    )
                    acknowledged.append((key, time.monotonic()))
                    if (
                        killed_at
                        and sum(1 for _, at in acknowledged if at > killed_at[0])
                        >= WRITES_AFTER_KILL
                    ):
                        return
            except BaseException as exc:
                failures.append(exc)

        writer = threading.Thread(target=stream, daemon=True)
        writer.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < 50 and time.monotonic() < deadline and not failures:
            time.sleep(0.01)
        old_leader = cluster.wait_for_leader()
        killed_at.append(time.monotonic())
        cluster.kill_node(old_leader, signal.SIGKILL)
        writer.join(timeout=60)
        stop.set()
        assert not writer.is_alive(), "writes did not resume within 60 s"
        assert not failures, f"the caller saw an error during failover: {failures[0]!r}"

        before = [at for _, at in acknowledged if at <= killed_at[0]]
        after = [at for _, at in acknowledged if at > killed_at[0]]
        stall = after[0] - killed_at[0]
        print(
            f"\nfailover: {len(before)} writes before the kill, {len(after)} after; "
            f"first acknowledged write {stall:.2f} s after SIGKILL of {old_leader.node_id}"
        )
        assert len(after) >= WRITES_AFTER_KILL

        keys = {key for key, _ in acknowledged}
        rows = store.query(Statement("SELECT k FROM acked"), consistency=Consistency.LINEARIZABLE)
        assert keys <= {row["k"] for row in rows}
        for survivor in (node for node in cluster.nodes if node.alive):
            deadline = time.monotonic() + 10
            present: set[object] = set()
            while not keys <= present and time.monotonic() < deadline:
                rows_here = cluster.local_rows(survivor, "SELECT k FROM acked") or []
                present = {row["k"] for row in rows_here}
                time.sleep(0.1)
            assert keys <= present, f"{survivor.node_id} lacks acknowledged writes"
        store.close()
