"""A worker's claims riding with its reports, against a real store.

While a worker claims ahead, a claim in flight may have been promised every
slot before a report could release anything. A report of a job with
children still claims one job then: the job it releases in the worker's own
queue comes back in the same write, rather than waiting for a claim of its
own.
"""

from __future__ import annotations

import time
import uuid

import anyio
import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import WorkflowSubmission
from taskq.broker.stores.store import Store
from taskq.worker.claim_requests import ClaimRequests
from taskq.worker.events import EventLog
from taskq.worker.heartbeat import Heartbeat, LeaseHolder
from taskq.worker.prefetch import Prefetch
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.settings import WorkerSettings
from taskq.worker.slots import Slots
from taskq.worker.store_outage import StoreOutage
from taskq.worker.store_runner import store_runner
from tests.support.reports import completed

pytestmark = pytest.mark.anyio


def _claims(store: Store, queue: str) -> tuple[ClaimRequests, Slots]:
    settings = WorkerSettings(queues=(queue,))
    slots = Slots(1, Prefetch(slots=1, most=0))
    deadline = LeaseDeadline(
        lease_seconds=settings.lease_seconds, margin_seconds=settings.lease_margin_seconds
    )
    holder = LeaseHolder(
        run=store_runner(store), worker_id="w1", settings=settings, slots=slots, deadline=deadline
    )
    events = EventLog()
    heartbeat = Heartbeat(holder, outage=StoreOutage(events, "w1"), events=events, maintainer=None)
    return ClaimRequests(holder, heartbeat=heartbeat, draining=anyio.Event()), slots


def _submit_pairs(store: Store, queue: str, *, chained: bool) -> tuple[int, int]:
    submission = WorkflowSubmission(
        jobs=(
            call_spec("tests.support.jobs:echo", ["first"], queue=queue),
            call_spec("tests.support.jobs:echo", ["second"], queue=queue),
        ),
        parents=((), (0,) if chained else ()),
    )
    first, second = plan.run(store, workflow_submit(submission)).job_ids
    return first, second


@pytest.mark.parametrize("chained", [True, False])
async def test_a_report_that_may_release_a_job_claims_one_even_with_every_slot_promised(
    store: Store, chained: bool
) -> None:
    queue = f"claims-{uuid.uuid4().hex[:8]}"
    claims, slots = _claims(store, queue)
    first, second = _submit_pairs(store, queue, chained=chained)
    _, took = await claims.report_and_claim([], 1, time.monotonic())
    assert (took, list(slots.held)) == (1, [first])
    parent = slots.held[first]
    assert parent.job.has_children is chained
    # A claim sent earlier holds every slot there is, and more.
    with slots.promised(slots.to_claim() + 3):
        [verdict] = await claims.send_reports([completed(parent.job.lease, "done")])
    assert verdict.value == "accepted"
    if chained:
        assert second in slots.held, "the job the report released came back with it"
    else:
        # Nothing a plain report frees: it claims nothing beyond what its slots allow.
        assert second not in slots.held
