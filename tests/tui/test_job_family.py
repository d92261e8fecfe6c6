"""The job view's workflow panel (a job's workflow, parents and children, live; enter opens one)
and the workflows view.

Pilot tests on a real SQLite store holding the seed's diamond
(``tests/tui/seed_workflow.py``) beside the usual seeded jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from msgspec.structs import replace
from textual.pilot import Pilot
from textual.widgets import Static

from taskq.app.app import ConsoleApp
from taskq.app.screens.job import JobScreen
from taskq.app.screens.jobs import JobsScreen
from taskq.app.screens.workflows import WorkflowsScreen
from taskq.app.widgets.relatives import RelativesPanel, RelativesTable
from taskq.app.widgets.tables import AttemptsTable, JobsTable, WorkflowsTable
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.jobs import job_cancel, job_list
from taskq.broker.ops.workflows import workflow_cancel
from taskq.broker.records import WorkflowSubmission
from taskq.broker.stores.store import Store
from tests.support.reports import completed, report_one
from tests.tui.seed import BASE, LAB_01, Seeded
from tests.tui.seed_workflow import QUEUE, Diamond, seed_diamond
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

AppFactory = Callable[..., ConsoleApp]


@pytest.fixture
def diamond(seeded: Seeded, sqlite_store: Store) -> Diamond:
    return seed_diamond(sqlite_store)


async def _open(pilot: Pilot[None], app: ConsoleApp, job_id: int) -> RelativesTable:
    """Open job ``job_id`` and wait until its first poll has been drawn."""
    app.open_job(job_id)
    await wait_for(
        pilot,
        lambda: (
            isinstance(app.screen, JobScreen)
            and app.screen.job_id == job_id
            and app.screen.detail is not None
        ),
        f"job {job_id}",
    )
    return app.screen.query_one(RelativesTable)


async def test_the_job_view_shows_its_workflow_parents_and_children_as_they_move(
    diamond: Diamond, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        relatives = await _open(pilot, app, diamond.train_small)
        panel = app.screen.query_one(RelativesPanel)
        counts = app.screen.query_one("#family-counts", Static)
        assert panel.display
        assert panel.border_title == f"Workflow {diamond.workflow_id} 'models'"
        assert plain(counts).strip() == "running: 2 queued, 1 waiting, 1 succeeded"
        assert relatives.row_keys() == [str(diamond.prepare), str(diamond.compare)]
        assert relatives.cell_text(str(diamond.prepare), "relation") == "parent"
        assert relatives.cell_text(str(diamond.prepare), "state") == "succeeded"
        assert relatives.cell_text(str(diamond.compare), "relation") == "child"
        assert relatives.cell_text(str(diamond.compare), "state") == "waiting"

        plan.run(sqlite_store, job_cancel([diamond.compare]))
        await wait_for(
            pilot,
            lambda: relatives.cell_text(str(diamond.compare), "state") == "cancelled",
            "the child's new state at the next poll",
        )
        await wait_for(
            pilot,
            lambda: plain(counts).strip() == "running: 2 queued, 1 succeeded, 1 cancelled",
            "the workflow's new counts",
        )


async def test_enter_on_a_relative_opens_it_and_escape_comes_back(
    diamond: Diamond, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        relatives = await _open(pilot, app, diamond.train_large)
        first = app.screen
        relatives.focus()
        await pilot.press("down", "enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, JobScreen) and app.screen.job_id == diamond.compare,
            "the child's own view",
        )
        children = app.screen.query_one(RelativesTable)
        await wait_for(pilot, lambda: children.row_count == 2, "the fan-in's two parents")
        assert children.row_keys() == [str(diamond.train_small), str(diamond.train_large)]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is first, "the job it was opened from")


async def test_a_spawned_job_and_its_spawner_name_each_other(
    diamond: Diamond, sqlite_store: Store, make_app: AppFactory
) -> None:
    run = partial(plan.run, sqlite_store)
    [small] = run(job_claim(LAB_01, [QUEUE], limit=1, lease_seconds=300, now=BASE - 400))
    assert small.lease.job_id == diamond.train_small
    extra = WorkflowSubmission(jobs=(call_spec("lab.models:report", [], queue=QUEUE),))
    run(report_one(replace(completed(small.lease, None), spawn=extra), now=BASE - 300))
    [spawned] = [
        job.id for job in run(job_list(workflow_id=diamond.workflow_id)) if job.id > diamond.compare
    ]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        relatives = await _open(pilot, app, diamond.train_small)
        await wait_for(pilot, lambda: relatives.row_count == 3, "its parent, child and spawn")
        assert relatives.row_keys() == [str(diamond.prepare), str(diamond.compare), str(spawned)]
        assert relatives.cell_text(str(spawned), "relation") == "spawned"
        assert relatives.cell_text(str(spawned), "state") == "queued"
        relatives = await _open(pilot, app, spawned)
        await wait_for(pilot, lambda: relatives.row_count == 1, "the job that spawned it")
        assert relatives.cell_text(str(diamond.train_small), "relation") == "spawner"
        assert relatives.cell_text(str(diamond.train_small), "state") == "succeeded"


async def test_a_job_of_no_workflow_shows_no_panel(seeded: Seeded, make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot, app, seeded.failed)
        attempts = app.screen.query_one(AttemptsTable)
        await wait_for(pilot, lambda: attempts.row_count == 1, "the attempt")
        assert not app.screen.query_one(RelativesPanel).display


async def test_the_jobs_view_lists_one_workflow_and_the_job_view_leads_there(
    diamond: Diamond, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot, app, diamond.compare)
        screen = app.screen
        assert isinstance(screen, JobScreen)
        [command] = [
            command
            for command in screen.palette_commands()
            if command.title == f"Jobs of workflow {diamond.workflow_id}"
        ]
        await command.run()
        await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen.query_one(JobsTable)
        newest_first = (diamond.compare, diamond.train_large, diamond.train_small, diamond.prepare)
        wanted = [str(job_id) for job_id in newest_first]
        await wait_for(pilot, lambda: jobs.row_keys() == wanted, "the workflow's four jobs")


async def test_the_workflows_view_counts_each_workflows_jobs_live_and_enter_lists_them(
    diamond: Diamond, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen), "the view")
        table = app.screen.query_one(WorkflowsTable)
        key = str(diamond.workflow_id)
        await wait_for(pilot, lambda: table.row_keys() == [key], "the seed's one workflow")
        assert table.cell_text(key, "name") == "models"
        assert table.cell_text(key, "submitter") == "ana@lab"
        counts = ("jobs", "waiting", "queued", "succeeded", "cancelled")
        assert [table.cell_text(key, column) for column in counts] == ["4", "1", "2", "1", "0"]
        assert table.cell_text(key, "status") == "running"

        plan.run(sqlite_store, job_cancel([diamond.compare]))
        await wait_for(
            pilot,
            lambda: (
                [table.cell_text(key, column) for column in counts] == ["4", "0", "2", "1", "1"]
            ),
            "the counts at the next poll",
        )
        plan.run(sqlite_store, workflow_cancel(diamond.workflow_id))
        await wait_for(
            pilot, lambda: table.cell_text(key, "status") == "cancelled", "its status at a poll"
        )
        # ``s`` steps through the statuses: none running, then it among the cancelled.
        status_line = app.screen.query_one("#workflows-status", Static)
        await pilot.press("s")
        await wait_for(
            pilot,
            lambda: "Workflows running" in plain(status_line) and "none" in plain(status_line),
            "no running workflow",
        )
        assert table.row_keys() == []
        await pilot.press("s", "s", "s")
        await wait_for(pilot, lambda: table.row_keys() == [key], "it among the cancelled")
        assert "Workflows cancelled" in plain(status_line)
        await pilot.press("s")
        await wait_for(pilot, lambda: "Workflows, newest" in plain(status_line), "all again")
        await wait_for(pilot, lambda: table.row_keys() == [key], "the seed's one workflow again")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen), "the jobs view")
        jobs = app.screen.query_one(JobsTable)
        await wait_for(pilot, lambda: jobs.row_count == 4, "the workflow's four jobs")
        assert app.screen.job_filter.workflow_id == diamond.workflow_id
