"""The job view's output panel shows the end of an attempt's output, as ``tail -f`` does: it
follows a running job's new lines unless the reader has scrolled up, and scrolls back through
what the console holds."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widget import Widget

from taskq.app.app import ConsoleApp
from taskq.app.screens.help import HelpScreen
from taskq.app.widgets.output_panel import OutputPanel
from taskq.app.widgets.panels import MOST_LINES, AttemptOutput
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.output import AttemptOutput as StoredOutput
from taskq.broker.ops.output import OutputChunk, output_append
from taskq.broker.records import ClaimedJob
from taskq.broker.stores.store import Store
from tests.support.reports import completed, report_one
from tests.tui.waiting import plain, wait_for

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


class Printing:
    """A claimed job whose output the test writes, numbered lines, as its worker would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        [self.job_id] = plan.run(store, job_enqueue([call_spec("lab.sims:run", [1], queue="q")]))
        claimed: list[ClaimedJob] = plan.run(
            store, job_claim("w1", ["q"], limit=1, lease_seconds=600)
        )
        self.job = claimed[0]
        self.lines = 0
        self.at_byte = 0

    def print_lines(self, count: int) -> None:
        """Print the next ``count`` lines: ``line 0``, ``line 1``, ..."""
        text = "".join(f"line {n}\n" for n in range(self.lines, self.lines + count))
        chunk = OutputChunk(self.at_byte, len(text.encode()), text)
        output = StoredOutput(self.job.lease, (chunk,), keep_bytes=1 << 20)
        plan.run(self.store, output_append([output]))
        self.lines += count
        self.at_byte = chunk.end

    def succeed(self) -> None:
        plan.run(self.store, report_one(completed(self.job.lease, "done")))


@pytest.fixture
def job(sqlite_store: Store) -> Printing:
    return Printing(sqlite_store)


@pytest.fixture
def app(sqlite_store: Store, make_app: Callable[..., ConsoleApp]) -> ConsoleApp:
    return make_app(sqlite_store)


def shown(app: ConsoleApp, widget: Widget) -> str:
    """The text inside ``widget``'s border as the terminal shows it now: only what is in view."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True)
    # The screen as the terminal receives it, drawn as App.export_screenshot draws it.
    console.print(app.screen._compositor.render_update(full=True))
    rows = console.export_text().splitlines()
    region = widget.content_region
    return "\n".join(row[region.x : region.right] for row in rows[region.y : region.bottom])


def numbers_shown(app: ConsoleApp, panel: OutputPanel) -> set[int]:
    """Which of the numbered lines are in view."""
    return {int(n) for n in re.findall(r"\bline (\d+)\b", shown(app, panel))}


async def open_output(pilot: Pilot[None], app: ConsoleApp, job: Printing) -> OutputPanel:
    """Open the job's view; wait until the last line it printed is in view, as it must be."""
    app.open_job(job.job_id)
    await wait_for(pilot, lambda: app.screen.query(OutputPanel), "the job screen")
    panel = app.screen.query_one(OutputPanel)
    last = job.lines - 1
    await wait_for(pilot, lambda: last in numbers_shown(app, panel), f"line {last} in view")
    return panel


async def test_a_finished_jobs_output_opens_at_its_last_lines_and_scrolls_back_to_its_first(
    job: Printing, app: ConsoleApp
) -> None:
    job.print_lines(60)
    job.succeed()
    async with app.run_test(size=SIZE) as pilot:
        panel = await open_output(pilot, app, job)
        assert 0 not in numbers_shown(app, panel)
        assert "output (tail)" not in shown(app, panel)

        await pilot.press("tab")  # from the attempts into the output
        assert app.focused is panel
        for _ in range(5):  # 60 lines in a panel of about 20: a few pages
            await pilot.press("pageup")
        await wait_for(pilot, lambda: 0 in numbers_shown(app, panel), "the first lines in view")
        assert "output (tail)" in shown(app, panel)
        assert 59 not in numbers_shown(app, panel)

        await pilot.press("end")
        await wait_for(pilot, lambda: 59 in numbers_shown(app, panel), "the last line again")


async def test_a_running_jobs_output_is_followed_unless_the_reader_scrolled_up(
    job: Printing, app: ConsoleApp
) -> None:
    job.print_lines(60)
    async with app.run_test(size=SIZE) as pilot:
        panel = await open_output(pilot, app, job)
        text = app.screen.query_one(AttemptOutput)

        job.print_lines(10)
        await wait_for(pilot, lambda: 69 in numbers_shown(app, panel), "the new lines followed")

        await pilot.press("l")  # the view's key for its output
        assert app.focused is panel
        await pilot.press("up", "up", "up")
        await wait_for(pilot, lambda: 69 not in numbers_shown(app, panel), "scrolled up")
        in_view, longest = numbers_shown(app, panel), panel.max_scroll_y
        job.print_lines(10)
        await wait_for(pilot, lambda: "line 79" in plain(text), "the next lines polled")
        await wait_for(pilot, lambda: panel.max_scroll_y > longest, "the next lines laid out")
        await pilot.pause()  # a scroll to the end would come after the refresh
        assert numbers_shown(app, panel) == in_view, "the reader was moved off what they read"

        await pilot.press("end")
        await wait_for(pilot, lambda: 79 in numbers_shown(app, panel), "the end, after end")
        job.print_lines(10)
        await wait_for(pilot, lambda: 89 in numbers_shown(app, panel), "followed again")


async def test_a_long_output_is_cut_to_its_last_lines_saying_where_the_rest_is(
    job: Printing, app: ConsoleApp
) -> None:
    job.print_lines(MOST_LINES + 700)
    async with app.run_test(size=SIZE) as pilot:
        panel = await open_output(pilot, app, job)
        await pilot.press("tab", "home")
        first = job.lines - MOST_LINES
        await wait_for(pilot, lambda: first in numbers_shown(app, panel), "the first line kept")
        assert first - 1 not in numbers_shown(app, panel)
        assert f"taskq logs {job.job_id} --attempt 1" in shown(app, panel)


async def test_the_help_of_the_job_view_tells_how_to_scroll_the_output(
    job: Printing, app: ConsoleApp
) -> None:
    job.print_lines(3)
    async with app.run_test(size=SIZE) as pilot:
        await open_output(pilot, app, job)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        keys = shown(app, app.screen.query_one(".dialog"))
        assert "job-output" in keys
        assert "PgUp/PgDn" in keys
