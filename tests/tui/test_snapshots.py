"""Snapshots of the overview, jobs, job and workflows views at 120x40, on data that never changes.

The store sits at a relative path (the test runs in its own directory), so
the URL and node address drawn are the same on every machine; the clock is
fixed and in UTC, and throughput is counted back from that same fixed time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from taskq.app.app import ConsoleApp
from taskq.app.formatting import Clock
from taskq.app.screens.submit import SubmitScreen
from taskq.app.source import ConsoleSource
from taskq.app.widgets.relatives import RelativesTable
from taskq.app.widgets.tables import AttemptsTable, JobsTable, WorkersTable, WorkflowsTable
from taskq.broker.client.client import AsyncClient
from taskq.broker.ops import migrations
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Store
from tests.tui.seed import BASE, Seeded, seed
from tests.tui.seed_workflow import seed_diamond
from tests.tui.waiting import plain, wait_for

SIZE = (120, 40)
SnapCompare = Callable[..., bool]


@pytest.fixture
def relative_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.chdir(tmp_path)
    store = SqliteStore("taskq.db")
    migrations.migrate(store)
    try:
        yield store
    finally:
        store.close()


def _app(store: Store, now: float) -> ConsoleApp:
    # A long interval: the screenshot is taken between polls, of settled data.
    # Throughput counts back from the same fixed time as every age shown.
    clock = Clock(now=lambda: now, tz=UTC)
    source = ConsoleSource(AsyncClient(store=store, import_names=False), store_now=lambda: now)
    return ConsoleApp(source, refresh_seconds=5.0, clock=clock)


def test_overview(snap_compare: SnapCompare, relative_store: Store) -> None:
    seed(relative_store)
    app = _app(relative_store, BASE)

    async def loaded(pilot: Pilot[None]) -> None:
        workers = app.screen.query_one(WorkersTable)
        await wait_for(pilot, lambda: workers.row_count == 3, "the workers")

    assert snap_compare(app, terminal_size=SIZE, run_before=loaded)


def test_jobs(snap_compare: SnapCompare, relative_store: Store) -> None:
    seed(relative_store)
    app = _app(relative_store, BASE)

    async def loaded(pilot: Pilot[None]) -> None:
        await pilot.press("j")
        jobs = app.screen.query_one(JobsTable)
        await wait_for(pilot, lambda: jobs.row_count > 0, "the jobs")

    assert snap_compare(app, terminal_size=SIZE, run_before=loaded)


def test_job_detail(snap_compare: SnapCompare, relative_store: Store) -> None:
    seeded: Seeded = seed(relative_store)
    app = _app(relative_store, BASE)

    async def loaded(pilot: Pilot[None]) -> None:
        await pilot.press("j")
        app.open_job(seeded.failed)
        await wait_for(pilot, lambda: app.screen.query(AttemptsTable), "the job screen")
        attempts = app.screen.query_one(AttemptsTable)
        await wait_for(pilot, lambda: attempts.row_count == 1, "the attempt")

    assert snap_compare(app, terminal_size=SIZE, run_before=loaded)


def test_the_form_at_80x24_with_its_error(snap_compare: SnapCompare, relative_store: Store) -> None:
    app = _app(relative_store, BASE)

    async def empty_submit(pilot: Pilot[None]) -> None:
        await wait_for(pilot, lambda: app.overview is not None, "the overview")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen), "the form")
        for field in app.screen.query(Input):
            field.cursor_blink = False  # a blinking cursor would make the picture flicker
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#submit-error", Static)
        await wait_for(pilot, lambda: "target must" in plain(error), "the error")

    assert snap_compare(app, terminal_size=(80, 24), run_before=empty_submit)


def test_job_detail_with_its_workflow(snap_compare: SnapCompare, relative_store: Store) -> None:
    seed(relative_store)
    diamond = seed_diamond(relative_store)
    app = _app(relative_store, BASE)

    async def loaded(pilot: Pilot[None]) -> None:
        app.open_job(diamond.train_small)
        await wait_for(pilot, lambda: app.screen.query(RelativesTable), "the job screen")
        relatives = app.screen.query_one(RelativesTable)
        await wait_for(pilot, lambda: relatives.row_count == 2, "its parent and its child")

    assert snap_compare(app, terminal_size=SIZE, run_before=loaded)


def test_workflows(snap_compare: SnapCompare, relative_store: Store) -> None:
    seed(relative_store)
    seed_diamond(relative_store)
    app = _app(relative_store, BASE)

    async def loaded(pilot: Pilot[None]) -> None:
        await pilot.press("w")
        await wait_for(pilot, lambda: app.screen.query(WorkflowsTable), "the workflows view")
        table = app.screen.query_one(WorkflowsTable)
        await wait_for(pilot, lambda: table.row_count == 1, "the seed's workflow")

    assert snap_compare(app, terminal_size=SIZE, run_before=loaded)
