"""Pilot tests of the actions, each checked in the store afterwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.widgets import Checkbox, Input, Static

from taskq.app.app import ConsoleApp
from taskq.app.screens.confirm import ConfirmScreen
from taskq.app.screens.submit import SubmitScreen
from taskq.app.source import JobFilter
from taskq.app.widgets.tables import JobsTable, QueuesTable
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_get, job_list
from taskq.broker.ops.queues import job_counts
from taskq.broker.records import Job, JobState
from taskq.broker.stores.store import Statement, Store
from tests.tui.seed import Seeded
from tests.tui.waiting import plain, screen_name, select_job, wait_for

pytestmark = pytest.mark.anyio

AppFactory = Callable[..., ConsoleApp]


def _state(store: Store, job_id: int) -> JobState:
    job = plan.run(store, job_get(job_id))
    assert job is not None
    return job.state


def _paused(store: Store, queue: str) -> bool:
    return next(stats.paused for stats in plan.run(store, job_counts()) if stats.queue == queue)


def _count(store: Store, queue: str, state: JobState) -> int:
    stats = next(stats for stats in plan.run(store, job_counts()) if stats.queue == queue)
    return stats.counts[state]


async def test_cancel_asks_first_and_cancels_a_queued_job(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select_job(pilot, app, JobFilter(queue="images"), seeded.queued)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("n")
        await wait_for(pilot, lambda: screen_name(app) == "JobsScreen", "the list again")
        assert _state(sqlite_store, seeded.queued) is JobState.QUEUED

        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: _state(sqlite_store, seeded.queued) is JobState.CANCELLED,
            "the job cancelled in the store",
        )
        table = app.screen.query_one(JobsTable)
        await wait_for(
            pilot,
            lambda: table.cell_text(str(seeded.queued), "state") == "cancelled",
            "the row to say so",
        )


async def test_cancel_of_a_job_gone_since_it_was_shown_says_so(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    notes: list[str] = []
    shown = app.notify

    def noted(message: str, **options: Any) -> None:
        notes.append(message)
        shown(message, **options)

    async with app.run_test(size=(120, 40)) as pilot:
        app.notify = noted  # type: ignore[method-assign]
        await select_job(pilot, app, JobFilter(queue="images"), seeded.queued)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        # Pruned while the question is asked: the answer names a job the store no longer
        # has. (Pruned before the key, the list's next poll could drop the row first, and
        # the key would take its neighbour.)
        sqlite_store.execute([Statement("DELETE FROM jobs WHERE id = :id", {"id": seeded.queued})])
        await pilot.press("y")
        gone = f"no job with id {seeded.queued}: it is gone since it was shown."
        await wait_for(pilot, lambda: gone in notes, "the notice that the job is gone")
        assert app.is_running


async def test_cancel_of_a_running_job_asks_its_worker_to_stop(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select_job(pilot, app, JobFilter(state=JobState.RUNNING), seeded.running)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")

        def requested() -> bool:
            job = plan.run(sqlite_store, job_get(seeded.running))
            return job is not None and job.cancel_requested

        await wait_for(pilot, requested, "the cancel request in the store")
        table = app.screen.query_one(JobsTable)
        await wait_for(
            pilot,
            lambda: table.cell_text(str(seeded.running), "state") == "cancelling",
            "the row to say cancelling",
        )


async def test_retry_of_a_dead_job_from_its_detail(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select_job(pilot, app, JobFilter(state=JobState.DEAD), seeded.dead)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_name(app) == "JobScreen", "the job screen")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: _state(sqlite_store, seeded.dead) is JobState.QUEUED,
            "the job queued again in the store",
        )


async def test_bulk_cancel_and_retry_of_the_filtered_set(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app(page_size=2)  # the bulk action covers the whole set, not the page shown
    queued_etl = _count(sqlite_store, "etl", JobState.QUEUED)
    queued_images = _count(sqlite_store, "images", JobState.QUEUED)
    assert queued_etl > 2
    async with app.run_test(size=(120, 40)) as pilot:
        await select_job(pilot, app, JobFilter(queue="etl"), max(_ids(sqlite_store, "etl")))
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: _count(sqlite_store, "etl", JobState.CANCELLED) == queued_etl + 1,
            "every queued etl job cancelled",
        )
        assert _count(sqlite_store, "etl", JobState.QUEUED) == 0
        assert _count(sqlite_store, "images", JobState.QUEUED) == queued_images

        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: _count(sqlite_store, "etl", JobState.QUEUED) == queued_etl + 1,
            "every cancelled etl job queued again",
        )


def _ids(store: Store, queue: str) -> list[int]:
    return [job.id for job in plan.run(store, job_list(queue=queue, limit=100))]


async def test_pause_asks_first_and_resume_does_not(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        queues = app.screen.query_one(QueuesTable)
        await wait_for(pilot, lambda: queues.row_count == 3, "the queues")
        queues.move_cursor(row=queues.get_row_index("images"))
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: _paused(sqlite_store, "images"), "images paused")
        await wait_for(pilot, lambda: queues.paused("images"), "the table to say paused")

        await pilot.press("p")
        await wait_for(pilot, lambda: not _paused(sqlite_store, "images"), "images resumed")
        await wait_for(pilot, lambda: not queues.paused("images"), "the table to say active")
        assert _paused(sqlite_store, "etl")


async def test_submit_a_job_from_the_form(
    seeded: Seeded, sqlite_store: Store, make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen), "the form")
        form = app.screen

        def fill(field: str, value: str) -> None:
            form.query_one(f"#{field}", Input).value = value

        fill("target", "lab.images:resize")
        fill("args", '["new.png", 640')
        await pilot.press("ctrl+s")
        error = form.query_one("#submit-error", Static)
        await wait_for(pilot, lambda: "not JSON" in plain(error), "the JSON error")
        assert isinstance(app.screen, SubmitScreen)

        fill("args", '["new.png", 640]')
        fill("queue", "thumbs")
        fill("priority", "5")
        form.query_one("#unchecked", Checkbox).value = True  # no worker declares it
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, SubmitScreen), "the form closed")

        def submitted() -> list[Job]:
            return plan.run(sqlite_store, job_list(queue="thumbs", limit=5))

        await wait_for(pilot, submitted, "the job in the store")
        [job] = submitted()
        assert job.payload == {
            "target": "lab.images:resize",
            "args": ["new.png", 640],
            "kwargs": {},
        }
        assert job.priority == 5
        assert job.state is JobState.QUEUED
