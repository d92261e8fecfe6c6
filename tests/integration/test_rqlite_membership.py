"""A real cluster that changes while workers drain a backlog: nodes added, removed, replaced.

Two real ``taskq-worker`` processes, given the URL of the first three nodes
only, run the chaos run's ledger-keeping jobs (``bench.chaos_jobs:work``)
while the cluster grows to five nodes, hands its lead to node 4, loses
node 1 (removed) and node 4 (SIGKILLed while leading, then replaced by a
fresh node 6). A batch of jobs is submitted before each step, so every step
meets work in flight. The chaos run's verdict then judges the store
against the ledger: every job succeeded exactly once, none lost or stuck,
no two runs of a job overlapping; and the cluster names the members it
should.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench import chaos_ledger, chaos_verdict
from bench.chaos_jobs import WORKER_ENV
from taskq.broker.client.client import Client, call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.records import JobState
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import Consistency, Statement, Store
from taskq.dev import membership
from taskq.dev.processes import wait_until
from tests.support.jobs import WORKER_TAG_ENV
from tests.support.rqlite_cluster import RqliteCluster, running_cluster
from tests.support.worker_process import WorkerFleet

pytestmark = pytest.mark.rqlite

QUEUE = "members"
BATCH = 12
JOB_SECONDS = 0.3
# The chaos run's: runs of one job sharing more than this are overlapping.
TOLERANCE = 0.05
WORKER_SETTINGS: dict[str, object] = {
    "concurrency": 2,
    "queues": [QUEUE],
    "modules": ["bench.chaos_jobs"],
    "env_passthrough": [WORKER_TAG_ENV, WORKER_ENV],
    # Leases that outlast an election: a lost leader costs no attempt.
    "lease_seconds": 6,
    "heartbeat_seconds": 1,
}


def _hand_the_lead_to(cluster: RqliteCluster, node_id: str) -> None:
    """Ask the leader to step down in favour of ``node_id`` (rqlite's ``POST /leader``)."""
    leader = cluster.wait_for_leader()
    request = urllib.request.Request(
        f"{leader.base_url}/leader",
        data=json.dumps({"id": node_id}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
    led = wait_until(lambda: _leader_id(cluster) == node_id, 20, interval=0.1)
    assert led, f"{node_id} did not take the lead"


def _leader_id(cluster: RqliteCluster) -> str | None:
    leader = cluster.leader()
    return None if leader is None else leader.node_id


@pytest.mark.timeout(180)  # every wait below is bounded well within this
def test_a_cluster_that_changes_during_a_drain_loses_no_job_and_runs_none_twice(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    with (
        running_cluster(tmp_path / "cluster") as cluster,
        WorkerFleet(tmp_path / "workers") as fleet,
    ):
        original_url = cluster.url  # nodes 1 to 3: the workers never hear of another URL
        for tag in ("wa", "wb"):
            fleet.start(original_url, tag=tag, worker=WORKER_SETTINGS, extra_env={WORKER_ENV: tag})
        origin = time.time()
        submitted: dict[str, int] = {}
        with Client(original_url, submitter="members") as client:

            def submit_batch(step: str) -> None:
                tokens = [f"{step}-{index:02}" for index in range(BATCH)]
                specs = [
                    call_spec(
                        "bench.chaos_jobs:work",
                        (token, JOB_SECONDS, str(ledger)),
                        queue=QUEUE,
                        max_attempts=20,
                        idempotency_key=token,
                    )
                    for token in tokens
                ]
                handles = client.submit_many(specs)
                submitted.update({token: h.id for token, h in zip(tokens, handles, strict=True)})

            submit_batch("grow4")
            membership.add_node(cluster)
            submit_batch("grow5")
            membership.add_node(cluster)
            submit_batch("lead4")
            _hand_the_lead_to(cluster, "node4")
            submit_batch("remove1")
            membership.remove_node(cluster, "node1")
            submit_batch("kill4")
            cluster.kill_node(membership.member(cluster, "node4"), signal.SIGKILL)
            submit_batch("replace4")
            fresh = membership.replace_node(cluster, "node4")
            submit_batch("after")

            def drained() -> bool:
                counts = client.stats()
                return not any(
                    queue.counts.get(JobState.QUEUED, 0) or queue.counts.get(JobState.RUNNING, 0)
                    for queue in counts
                    if queue.queue == QUEUE
                )

            assert wait_until(drained, 60, interval=0.2), fleet.describe()
        assert all(worker.running for worker in fleet.workers), fleet.describe()

        store = open_store(original_url, migrate=False)
        assert isinstance(store, RqliteStore)
        try:
            verdict = _verdict(store, submitted, ledger, origin)
            nodes = store.nodes()
            learned = list(store.cluster.nodes)
        finally:
            store.close()
    counts = {name: verdict[name] for name in ("lost", "stuck", "wrong", "zombie", "overlap")}
    assert counts == dict.fromkeys(counts, 0), verdict["examples"]
    assert verdict["runs"] >= len(submitted) == 7 * BATCH
    assert fresh.node_id == "node6"
    assert sorted(node.id for node in nodes) == ["node2", "node3", "node5", "node6"]
    assert all(node.reachable for node in nodes), nodes
    assert sum(node.leader for node in nodes) == 1, nodes
    # A client given nodes 1 to 3 reaches the members it was never told of.
    assert {f"http://{node.http_addr}" for node in cluster.nodes} <= set(learned)


def _verdict(store: Store, submitted: dict[str, int], ledger: Path, origin: float) -> Any:
    """The chaos run's verdict on the store's rows of the queue, read linearizably."""

    def rows(sql: str) -> list[dict[str, object]]:
        found = store.query(Statement(sql, {"queue": QUEUE}), consistency=Consistency.LINEARIZABLE)
        return [dict(row) for row in found]

    jobs = {int(str(row["id"])): row for row in rows("SELECT * FROM jobs WHERE queue = :queue")}
    executions = rows(
        "SELECT executions.* FROM executions JOIN jobs ON jobs.id = executions.job_id "
        "WHERE jobs.queue = :queue ORDER BY executions.id"
    )
    workers = {str(row["id"]): str(row["name"]) for row in rows("SELECT id, name FROM workers")}
    runs = chaos_ledger.read_ledger(ledger)
    return chaos_verdict.judge(submitted, jobs, executions, workers, runs, TOLERANCE, origin)
