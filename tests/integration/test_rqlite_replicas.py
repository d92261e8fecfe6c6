"""Every replica of a real cluster ends with the same rows when the store's clock decides.

rqlite replays each statement on every node, so anything a node evaluates
for itself (its clock, random()) would make the copies drift apart. The
broker's statements read time from the clock row that the receiving node
fills in; this test runs the whole job lifecycle without an injected time
and compares each node's own copy.
"""

from __future__ import annotations

import time
import uuid

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.heartbeats import job_heartbeat, job_progress
from taskq.broker.ops.jobs import job_cancel
from taskq.broker.ops.leader import leader_attempt_elect
from taskq.broker.ops.maintenance import job_requeue_expired, worker_mark_lost
from taskq.broker.ops.queues import queue_set_paused
from taskq.broker.ops.workers import worker_register
from taskq.broker.records import AttemptReport
from tests.support.reports import completed, failed, report_one
from tests.support.rqlite_cluster import RqliteCluster

TABLES = ("taskq_clock", "jobs", "executions", "workers", "job_counts", "leader", "queues")


def _snapshot(cluster: RqliteCluster) -> list[dict[str, object]]:
    copies = []
    for node in cluster.nodes:
        copy: dict[str, object] = {}
        for table in TABLES:
            copy[table] = cluster.local_rows(node, f"SELECT * FROM {table} ORDER BY 1, 2")
        copies.append(copy)
    return copies


def test_replicas_agree_after_a_lifecycle_on_store_time(rqlite_cluster: RqliteCluster) -> None:
    queue = f"replicas-{uuid.uuid4().hex[:8]}"
    store = open_store(rqlite_cluster.url)
    try:
        run = lambda op: plan.run(store, op)  # noqa: E731 - a local shorthand
        run(worker_register("w", name="w", host="h", pid=1, queues=[queue], labels=[], slots=4))
        specs = [call_spec("m:f", [i], queue=queue, max_attempts=2) for i in range(6)]
        specs.append(call_spec("m:f", queue=queue, delay=0.5))
        run(job_enqueue(specs))
        claimed = run(job_claim("w", [queue], limit=6, lease_seconds=0.2))
        run(job_heartbeat("w", [job.lease for job in claimed[:2]], lease_seconds=60))
        run(report_one(completed(claimed[0].lease, {"ok": True}, AttemptReport("succeeded"))))
        run(report_one(failed(claimed[1].lease, {"type": "E", "message": "retry me"})))
        run(job_progress(claimed[2].lease, 0.5, "half"))
        run(job_cancel([claimed[3].lease.job_id]))
        time.sleep(0.5)
        run(job_requeue_expired())
        run(leader_attempt_elect("maintenance", "w", ttl_seconds=5))
        run(queue_set_paused(queue, True))
        run(worker_mark_lost(grace_seconds=3600))

        deadline = time.monotonic() + 15
        copies = _snapshot(rqlite_cluster)
        while any(copy != copies[0] for copy in copies) and time.monotonic() < deadline:
            time.sleep(0.2)
            copies = _snapshot(rqlite_cluster)
        jobs = copies[0]["jobs"]
        assert isinstance(jobs, list)
        assert len([job for job in jobs if job["queue"] == queue]) == 7
        for node, copy in zip(rqlite_cluster.nodes, copies, strict=True):
            for table in TABLES:
                assert copy[table] == copies[0][table], f"{node.node_id} differs in {table}"
    finally:
        store.close()
