"""Bounded waits for pilot tests: poll a condition while the app runs, fail after a timeout;
and the steps the tests share that wait so."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from taskq.app.app import ConsoleApp
from taskq.app.source import JobFilter
from taskq.app.widgets.tables import JobsTable


async def wait_for(
    pilot: Pilot[None], condition: Callable[[], object], what: str, timeout: float = 10.0
) -> None:
    """Let the app run until ``condition()`` is true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.02)


def screen_name(app: ConsoleApp) -> str:
    """The class name of the screen on top, e.g. ``JobsScreen``."""
    return type(app.screen).__name__


def plain(widget: Static) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def select_job(
    pilot: Pilot[None], app: ConsoleApp, job_filter: JobFilter, job_id: int
) -> None:
    """Show the jobs of ``job_filter`` and put the cursor on ``job_id`` once it is listed."""
    await app.show_jobs(job_filter)
    table = app.screen.query_one(JobsTable)
    await wait_for(pilot, lambda: str(job_id) in table.row_keys(), f"job {job_id} in the list")
    table.move_cursor(row=table.get_row_index(str(job_id)))
