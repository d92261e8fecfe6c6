"""An attempt its worker handed back (a drain) uses no attempt: its output panel says so,
for the next run has the same number and the attempts table shows two rows numbered 1;
and why it was handed back, where its record keeps that."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from taskq.broker.records import Lease
from taskq.broker.stores.store import Store
from tests.support.reports import released, report_one
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio


async def _panel_of_hand_back(
    store: Store,
    make_app: Callable[..., ConsoleApp],
    shown: str,
    report_fields: Callable[[Lease], dict[str, Any]],
) -> str:
    """The output panel of a job's one attempt, handed back with the report's fields
    ``report_fields(lease)``, once it shows ``shown``."""
    [job_id] = plan.run(store, job_enqueue([call_spec("lab.etl:load", [1], queue="etl")]))
    [job] = plan.run(store, job_claim("w1", ["etl"], limit=1, lease_seconds=60))
    report = msgspec.structs.replace(released(job.lease), **report_fields(job.lease))
    plan.run(store, report_one(report))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(job_id)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        panel = app.screen.query_one(AttemptOutput)
        await wait_for(pilot, lambda: shown in plain(panel), repr(shown))
        return plain(panel)


async def test_a_handed_back_attempts_output_says_it_was_not_counted(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    text = "loading rows\n"

    def with_output(lease: Lease) -> dict[str, Any]:
        chunks = (OutputChunk(0, len(text), text),)
        return {"output": StoredOutput(lease, chunks, keep_bytes=1 << 20)}

    panel = await _panel_of_hand_back(sqlite_store, make_app, "loading rows", with_output)
    assert "handed back by its worker" in panel
    assert "not counted" in panel


async def test_a_hand_back_that_kept_its_reason_shows_it_not_a_guess(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    why = {"type": "HandedBack", "message": "handed back: the worker is draining; killed"}
    panel = await _panel_of_hand_back(
        sqlite_store, make_app, "the worker is draining", lambda _: {"error": why}
    )
    assert "not counted" in panel
    assert "(a drain, say)" not in panel
