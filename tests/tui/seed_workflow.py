"""A small workflow for the console tests, written as the seed writes: ``now`` injected.

A diamond on queue ``flows``: ``prepare`` first, ``train_small`` and
``train_large`` after it, ``compare`` after both. ``prepare`` has run and
succeeded, so the two trainings are queued and ``compare`` waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import AttemptReport, WorkflowSubmission
from taskq.broker.stores.store import Store
from tests.support.reports import completed, report_one
from tests.tui.seed import BASE, LAB_01

QUEUE = "flows"


@dataclass(frozen=True, slots=True)
class Diamond:
    """The workflow's id and its jobs' ids."""

    workflow_id: int
    prepare: int
    train_small: int
    train_large: int
    compare: int


def seed_diamond(store: Store, base: float = BASE) -> Diamond:
    """Write the diamond and run its first job; the rest stays as the docstring says."""
    run = partial(plan.run, store)
    jobs = tuple(
        call_spec(f"lab.models:{name}", args, queue=QUEUE, submitter="ana@lab")
        for name, args in (
            ("prepare", ["s3://lab/cifar"]),
            ("train_small", [64]),
            ("train_large", [512]),
            ("compare", []),
        )
    )
    submission = WorkflowSubmission(
        jobs=jobs,
        parents=((), (0,), (0,), (1, 2)),
        name="models",
        idempotency_key="models-1",
        submitter="ana@lab",
    )
    written = run(workflow_submit(submission, now=base - 600))
    [first] = run(job_claim(LAB_01, [QUEUE], limit=1, lease_seconds=300, now=base - 540))
    report = AttemptReport(outcome="succeeded", exit_code=0, cpu_seconds=12.0)
    run(report_one(completed(first.lease, {"rows": 50_000}, report), now=base - 500))
    prepare, small, large, compare = written.job_ids
    return Diamond(written.id, prepare, small, large, compare)
