"""A job queued or running again after a failed attempt: the console says that error is
an earlier attempt's, not the job's "Last error", which only an ended job has."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from taskq.app.app import ConsoleApp
from taskq.app.widgets.panels import ResultPanel
from taskq.app.widgets.tables import AttemptsTable
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.records import AttemptReport
from taskq.broker.stores.store import Store
from tests.support.reports import failed, report_one
from tests.tui.seed import Seeded
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio


async def test_a_job_running_its_next_attempt_shows_no_last_error(
    seeded: Seeded, make_app: Callable[..., ConsoleApp]
) -> None:
    # The seed's "retrying" job failed once and a worker now runs its second attempt.
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(seeded.retrying)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        result = app.screen.query_one(ResultPanel)
        await wait_for(pilot, lambda: "none yet" in plain(result), "the job's result panel")
        assert result.border_title == "Result"
        assert "none yet: the job is running" in plain(result)
        assert "an earlier attempt failed: OverflowError: step 6120 diverged" in plain(result)


async def test_a_job_queued_for_a_retry_shows_no_last_error(
    sqlite_store: Store, make_app: Callable[..., ConsoleApp]
) -> None:
    [job_id] = plan.run(sqlite_store, job_enqueue([call_spec("lab.etl:load", [1], queue="etl")]))
    [job] = plan.run(sqlite_store, job_claim("w1", ["etl"], limit=1, lease_seconds=60))
    error = {"type": "OSError", "message": "disk not mounted"}
    plan.run(sqlite_store, report_one(failed(job.lease, error, AttemptReport(outcome="error"))))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job(job_id)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        result = app.screen.query_one(ResultPanel)
        await wait_for(pilot, lambda: "none yet" in plain(result), "the job's result panel")
        assert result.border_title == "Result"
        assert "none yet: the job is queued" in plain(result)
        assert "an earlier attempt failed: OSError: disk not mounted" in plain(result)
