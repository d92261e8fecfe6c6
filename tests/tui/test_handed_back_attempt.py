"""An attempt its worker handed back (a drain) uses no attempt: its output panel says so,
for the next run has the same number and the attempts table shows two rows numbered 1."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from taskq.app.app import ConsoleApp
from taskq.app.widgets.panels import AttemptOutput
from taskq.app.widgets.tables import AttemptsTable
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.output import AttemptOutput as StoredOutput
from taskq.broker.ops.output import OutputChunk
from taskq.broker.stores.store import Store
from tests.support.reports import released, report_one
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio


async def test_a_handed_back_attempts_output_says_it_was_not_counted(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    [job_id] = plan.run(sqlite_store, job_enqueue([call_spec("lab.etl:load", [1], queue="etl")]))
    [job] = plan.run(sqlite_store, job_claim("w1", ["etl"], limit=1, lease_seconds=60))
    text = "loading rows\n"
    output = StoredOutput(job.lease, (OutputChunk(0, len(text), text),), keep_bytes=1 << 20)
    report = msgspec.structs.replace(released(job.lease), output=output)
    plan.run(sqlite_store, report_one(report))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(job_id)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        panel = app.screen.query_one(AttemptOutput)
        await wait_for(pilot, lambda: "loading rows" in plain(panel), "the attempt's output")
        assert "handed back by its worker" in plain(panel)
        assert "not counted" in plain(panel)
