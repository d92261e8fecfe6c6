"""The job view tails a running attempt's output live, as its worker stores it."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.widgets.panels import AttemptOutput
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.output import AttemptOutput as StoredOutput
from taskq.broker.ops.output import OutputChunk, output_append
from taskq.broker.records import ClaimedJob
from taskq.broker.stores.store import Store
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio


def _print(store: Store, job: ClaimedJob, start: int, text: str) -> int:
    """Store ``text`` as the running job's output from byte ``start``, as a worker does."""
    chunk = OutputChunk(start, len(text.encode()), text)
    plan.run(store, output_append([StoredOutput(job.lease, (chunk,), keep_bytes=1 << 20)]))
    return start + chunk.size


async def test_the_job_view_tails_a_running_attempts_output(
    store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    """On each kind of store (``store``: the suite's SQLite file, or the rqlite tier's cluster)."""
    queue = f"sims-{uuid.uuid4().hex[:8]}"  # the rqlite tier's cluster is the session's
    spec = call_spec("lab.sims:run", [1], queue=queue)
    [job_id] = plan.run(store, job_enqueue([spec]))
    [job] = plan.run(store, job_claim("w1", [queue], limit=1, lease_seconds=60))
    written = _print(store, job, 0, "step 1 of 3\n")
    app = make_app(store)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(job_id)
        await wait_for(pilot, lambda: app.screen.query(AttemptOutput), "the job screen")
        output = app.screen.query_one(AttemptOutput)
        await wait_for(pilot, lambda: "step 1 of 3" in plain(output), "the first line")
        assert "output (live)" in plain(output)
        _print(store, job, written, "step 2 of 3\n")
        await wait_for(pilot, lambda: "step 2 of 3" in plain(output), "the line printed since")
        assert plain(output).index("step 1 of 3") < plain(output).index("step 2 of 3")
