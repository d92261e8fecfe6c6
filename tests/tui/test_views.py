"""Pilot tests on a real, seeded SQLite store: the views, navigation and filtering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.widgets import Input, Static

from taskq.app.app import ConsoleApp
from taskq.app.screens.help import HelpScreen
from taskq.app.screens.jobs import JobsScreen
from taskq.app.source import JobFilter
from taskq.app.widgets.panels import AttemptOutput
from taskq.app.widgets.tables import AttemptsTable, JobsTable, NodesTable, QueuesTable, WorkersTable
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_cancel, job_list
from taskq.broker.records import JobState
from taskq.broker.stores.store import Store
from tests.tui.seed import LAB_01, LAB_02, LAB_03, Seeded
from tests.tui.waiting import plain, screen_name, wait_for

pytestmark = pytest.mark.anyio

AppFactory = Callable[..., ConsoleApp]


def _jobs(app: ConsoleApp) -> JobsTable:
    return app.screen.query_one(JobsTable)


def _job_ids(app: ConsoleApp) -> list[int]:
    return [int(key) for key in _jobs(app).row_keys()]


def _expected_ids(store: Store, **filters: Any) -> list[int]:
    return [job.id for job in plan.run(store, job_list(limit=100, **filters))]


async def test_overview_shows_the_store_queues_and_workers(
    seeded: Seeded, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        queues = app.screen.query_one(QueuesTable)
        await wait_for(pilot, lambda: queues.row_count == 3, "three queues")
        assert queues.row_keys() == ["etl", "images", "sims"]
        assert queues.cell_text("etl", "status") == "paused"
        assert queues.cell_text("images", "succeeded") == "56"
        assert queues.cell_text("sims", "dead") == "1"

        nodes = app.screen.query_one(NodesTable)
        [node] = nodes.row_keys()
        assert nodes.cell_text(node, "id") == "embedded"
        assert nodes.cell_text(node, "role") == "★ leader"
        assert nodes.cell_text(node, "reachable") == "yes"

        workers = app.screen.query_one(WorkersTable)
        await wait_for(pilot, lambda: workers.row_count == 3, "three workers")
        assert workers.cell_text(LAB_03, "state") == "LOST"
        assert workers.cell_text(LAB_03, "heartbeat") == "1h00m"
        assert workers.cell_text(LAB_02, "slots") == "1/2"
        assert workers.cell_text(LAB_02, "capacity") == "2"
        assert workers.cell_text(LAB_01, "capacity") == "4/8"  # autoscaling up to 8
        assert workers.cell_text(LAB_02, "jobs") == f"#{seeded.retrying}"
        # What each worker's policy lets it run; lab-03 recorded none (an older taskq).
        assert workers.cell_text(LAB_01, "runs") == "lab.images"
        assert workers.cell_text(LAB_02, "runs") == "lab +shell"
        assert workers.cell_text(LAB_03, "runs") == "-"
        assert app.problem is None


async def test_navigation_between_the_views(seeded: Seeded, make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert screen_name(app) == "OverviewScreen"
        await pilot.press("j")
        assert screen_name(app) == "JobsScreen"
        await wait_for(pilot, lambda: _jobs(app).row_count > 0, "the jobs list")
        assert _jobs(app).cursor_job == max(_job_ids(app))

        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_name(app) == "JobScreen", "the job screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen_name(app) == "JobsScreen", "the jobs list again")

        await pilot.press("o")
        assert screen_name(app) == "OverviewScreen"
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert ("p", "Pause/resume queue", "toggle-pause") in help_screen.keys
        await pilot.press("escape")
        assert screen_name(app) == "OverviewScreen"

        # Enter on a worker lists the jobs it ran.
        await pilot.press("tab")
        assert app.focused is app.screen.query_one(WorkersTable)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: screen_name(app) == "JobsScreen", "the worker's jobs")
        jobs_screen = app.screen
        assert isinstance(jobs_screen, JobsScreen)
        assert jobs_screen.job_filter.worker_id == LAB_02


async def test_command_palette_offers_filters_and_actions(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.overview is not None, "the first overview")
        await pilot.press("colon")
        await pilot.press(*"state dead")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_name(app) == "JobsScreen", "the jobs list")
        await wait_for(pilot, lambda: _job_ids(app) == [seeded.dead], "the dead job only")


async def test_filtering_by_state_queue_worker_and_text(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("j")
        await wait_for(pilot, lambda: _jobs(app).row_count > 0, "the jobs list")

        async def apply(line: str, expected: list[int]) -> None:
            await pilot.press("slash")
            app.screen.query_one("#filter", Input).value = line
            await pilot.press("enter")
            await wait_for(pilot, lambda: _job_ids(app) == expected, f"the jobs of {line!r}")

        await apply("state:failed", [seeded.failed])
        await apply("queue:etl", _expected_ids(sqlite_store, queue="etl"))
        await apply(
            f"worker:{LAB_02} state:queued",
            _expected_ids(sqlite_store, worker_id=LAB_02, state=JobState.QUEUED),
        )
        await apply("scan-0003.png", [4])
        await apply("'\"seed\":99'", [seeded.dead])
        await apply("", _expected_ids(sqlite_store))

        # `s` steps through the states; `x` clears the filter.
        await pilot.press("s")
        await wait_for(
            pilot,
            lambda: _job_ids(app) == _expected_ids(sqlite_store, state=JobState.QUEUED),
            "the queued jobs",
        )
        await pilot.press("x")
        await wait_for(pilot, lambda: _job_ids(app) == _expected_ids(sqlite_store), "all jobs")


async def test_a_bad_filter_says_why_and_keeps_the_table(
    seeded: Seeded, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("j")
        await wait_for(pilot, lambda: _jobs(app).row_count > 0, "the jobs list")
        shown = _job_ids(app)
        await pilot.press("slash", *"state:lost", "enter")
        status = app.screen.query_one("#jobs-status", Static)
        await wait_for(pilot, lambda: "unknown state 'lost'" in plain(status), "the error")
        await pilot.pause(0.2)
        assert _job_ids(app) == shown
        await pilot.press("ctrl+a", "ctrl+k", *"state:dead", "enter")
        await wait_for(pilot, lambda: _job_ids(app) == [seeded.dead], "the dead job")
        assert "unknown state" not in plain(status)


async def test_keyset_paging(seeded: Seeded, sqlite_store: Store, make_app: AppFactory) -> None:
    app = make_app(page_size=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("j")
        newest = _expected_ids(sqlite_store)[:10]
        await wait_for(pilot, lambda: _job_ids(app) == newest, "the newest page")
        await pilot.press("right_square_bracket")
        older = [job.id for job in plan.run(sqlite_store, job_list(before=newest[-1], limit=10))]
        await wait_for(pilot, lambda: _job_ids(app) == older, "the next page")
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: _job_ids(app) == newest, "the newest page again")


async def test_one_page_reads_as_a_count_and_paging_only_when_there_are_pages(
    seeded: Seeded, make_app: AppFactory
) -> None:
    app = make_app(page_size=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.show_jobs(JobFilter(queue="sims", state=JobState.QUEUED))
        status = app.screen.query_one("#jobs-status", Static)
        await wait_for(pilot, lambda: _jobs(app).row_count == 2, "the two queued sims jobs")
        await wait_for(pilot, lambda: "·  2 jobs" in plain(status), "the count")
        assert "page" not in plain(status)

        # Six etl jobs on pages of four: the first page says more follow, and
        # only the page the reader moved to says it is the oldest.
        await app.show_jobs(JobFilter(queue="etl"))
        await wait_for(pilot, lambda: "] older" in plain(status), "the first of two pages")
        assert "page 1" in plain(status)
        assert "oldest" not in plain(status)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: "oldest page" in plain(status), "the second page")
        assert "page 2, older than" in plain(status)


async def test_rows_update_in_place_and_the_cursor_stays(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("j")
        table = _jobs(app)
        await wait_for(pilot, lambda: table.row_count > 0, "the jobs list")
        target = str(seeded.queued)
        table.move_cursor(row=table.get_row_index(target))
        row_count = table.row_count

        plan.run(sqlite_store, job_cancel([seeded.queued]))
        await wait_for(
            pilot, lambda: table.cell_text(target, "state") == "cancelled", "the state to change"
        )
        assert table.cursor_key == target
        assert table.row_count == row_count

        [new_id] = plan.run(
            sqlite_store,
            job_enqueue([call_spec("lab.images:resize", ["fresh.png"], queue="images")]),
        )
        await wait_for(pilot, lambda: _job_ids(app)[0] == new_id, "the new job on top")
        assert table.cursor_key == target


async def test_opening_a_job_shows_its_attempts_output_and_error(
    seeded: Seeded, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("j")
        await wait_for(pilot, lambda: _jobs(app).row_count > 0, "the jobs list")
        app.open_job(seeded.failed)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        attempts = app.screen.query_one(AttemptsTable)
        await wait_for(pilot, lambda: attempts.row_count == 1, "one attempt")
        key = attempts.row_keys()[0]
        assert attempts.cell_text(key, "outcome") == "error"
        assert attempts.cell_text(key, "memory") == "96.0 MiB"
        assert attempts.cell_text(key, "duration") == "41.0s"
        output = plain(app.screen.query_one(AttemptOutput))
        assert "ValueError: seed 1 is not allowed" in output
        assert "step 6100" in output
