"""On a cluster, the jobs a worker's report releases wake the idle workers of their queue.

A submitting client hints the workers of its jobs' queues; a job released by
its last parent's report has no client to do so, and is hinted by the worker
that sent the report. The idle worker here is a bare hint socket registered
for the child's queue: it wakes on a hint and on nothing else (no poll), so
its waking within the bound below can only be the release's hint.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_get
from taskq.broker.ops.workers import worker_set_state
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import JobState, WorkflowSubmission
from taskq.broker.stores.store import Store
from taskq.broker.stores.wake_hints import WakeListener
from tests.support.hinted_workers import register_worker
from tests.support.rqlite_cluster import RqliteCluster
from tests.support.worker_process import WorkerFleet

pytestmark = [pytest.mark.rqlite, pytest.mark.timeout(120)]

# Far below anything a poll could explain: the listener does not poll at all.
WOKEN_WITHIN = 20.0


@pytest.fixture
def cluster_store(rqlite_cluster: RqliteCluster) -> Iterator[Store]:
    opened = open_store(rqlite_cluster.url)
    yield opened
    opened.close()


def test_a_job_released_by_a_report_is_hinted_to_the_idle_workers_of_its_queue(
    rqlite_cluster: RqliteCluster, cluster_store: Store, workers: WorkerFleet
) -> None:
    prefix = f"release-hint-{uuid.uuid4().hex[:8]}"
    parents_queue, child_queue = f"{prefix}-parents", f"{prefix}-child"
    workers.start(rqlite_cluster.url, worker={"queues": [parents_queue], "idle_poll_seconds": 30})
    listener = WakeListener("127.0.0.1")
    idle_worker = f"{prefix}-idle"
    register_worker(cluster_store, idle_worker, [child_queue], listener.address)
    try:
        # Written by the operation, not by a client: no submit's hint reaches the listener.
        submission = WorkflowSubmission(
            jobs=(
                call_spec("tests.support.jobs:echo", ["parent"], queue=parents_queue),
                call_spec("tests.support.jobs:echo", ["child"], queue=child_queue),
            ),
            parents=((), (0,)),
        )
        parent, child = plan.run(cluster_store, workflow_submit(submission)).job_ids

        async def woken() -> None:
            with anyio.fail_after(WOKEN_WITHIN):
                await listener.wait(3 * WOKEN_WITHIN)

        anyio.run(woken)
        # Woken by the release, not before it: the parent has ended and the child is queued.
        states = [plan.run(cluster_store, job_get(job_id)) for job_id in (parent, child)]
        assert [None if job is None else job.state for job in states] == [
            JobState.SUCCEEDED,
            JobState.QUEUED,
        ]
    finally:
        plan.run(cluster_store, worker_set_state(idle_worker, "stopped"))
        listener.close()
