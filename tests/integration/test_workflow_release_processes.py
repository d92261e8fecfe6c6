"""Two parents that end at once, on two worker processes, release their child exactly once."""

from __future__ import annotations

import uuid
from typing import Any

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import Fenced, WorkflowSubmission
from taskq.broker.stores.store import Consistency, Statement
from tests.support.processes import run_together
from tests.support.reports import completed, failed, report_one

ROUNDS = 12
PROCESSES = 2


def _end_one_parent_a_round(url: str, prefix: str, barrier: Any, out: Any) -> None:
    """Each round: claim one parent while the other process claims the other, then both
    report at the same moment (the barrier). Half the rounds end their parents failed."""
    try:
        store = open_store(url)
        ended = 0
        for round_ in range(ROUNDS):
            barrier.wait(timeout=60)
            claimed = plan.run(
                store,
                job_claim(f"w-{id(store)}", [f"{prefix}-{round_}"], limit=1, lease_seconds=60),
            )
            barrier.wait(timeout=60)
            for job in claimed:
                if round_ % 2:
                    report = failed(job.lease, {"type": "Boom", "message": ""}, retryable=False)
                else:
                    report = completed(job.lease, round_)
                assert plan.run(store, report_one(report)) is Fenced.ACCEPTED
                ended += 1
        store.close()
        out.put(ended)
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_parents_ending_together_release_or_cancel_their_child_once(url: str) -> None:
    prefix = f"pair-{uuid.uuid4().hex[:8]}"
    children_queue = f"{prefix}-children"
    store = open_store(url)
    children = []
    for round_ in range(ROUNDS):
        parents_queue = f"{prefix}-{round_}"
        submission = WorkflowSubmission(
            jobs=(
                call_spec("m:f", queue=parents_queue),
                call_spec("m:f", queue=parents_queue),
                call_spec("m:f", queue=children_queue),
            ),
            parents=((), (), (0, 1)),
        )
        children.append(plan.run(store, workflow_submit(submission)).job_ids[-1])
    results = run_together(_end_one_parent_a_round, (url, prefix), PROCESSES)
    assert sum(results) == 2 * ROUNDS
    assert all(results), "one process ended every parent: the two never raced"
    rows = store.query(
        Statement(
            "SELECT id, state, parents_left, parents_failed FROM jobs WHERE queue = :queue "
            "ORDER BY id",
            {"queue": children_queue},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    # Each parent's end counted once (none lost, none twice), and the child moved on once.
    assert [row["id"] for row in rows] == children
    for round_, row in enumerate(rows):
        if round_ % 2:
            assert row["state"] == "cancelled"
        else:
            assert (row["state"], row["parents_left"], row["parents_failed"]) == ("queued", 0, 0)
    counts = store.query(
        Statement(
            "SELECT state, n FROM job_counts WHERE queue = :queue AND n > 0",
            {"queue": children_queue},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    assert {row["state"]: row["n"] for row in counts} == {
        "queued": ROUNDS // 2,
        "cancelled": ROUNDS // 2,
    }
    store.close()
