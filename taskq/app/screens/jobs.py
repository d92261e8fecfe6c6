"""The jobs view: a filtered, keyset-paged table of jobs, newest first, updated in place."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from taskq.app import filter_query, states
from taskq.app.commands import PaletteCommand
from taskq.app.console import Console
from taskq.app.screens.pages import KeysetCursors, poll_pages
from taskq.app.source import JobFilter, JobPage
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.tables import JobsTable
from taskq.broker.records import JobState

# The order `s` steps the state filter through; None lists every state.
_STATE_CYCLE: tuple[JobState | None, ...] = (None, *JobState)


class JobsScreen(Screen[None]):
    """Lists one keyset page of the jobs a filter matches and acts on them."""

    CSS_PATH = "jobs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter", id="filter"),
        Binding("s", "cycle_state", "State", id="cycle-state"),
        Binding("x", "clear_filter", "Clear", id="clear-filter"),
        Binding("c", "cancel_job", "Cancel", id="cancel-job"),
        Binding("r", "retry_job", "Retry", id="retry-job"),
        Binding("C", "cancel_matching", "Cancel all", id="cancel-matching"),
        Binding("R", "retry_matching", "Retry all", id="retry-matching"),
        Binding("left_square_bracket", "page(-1)", "Newer", id="page-newer"),
        Binding("right_square_bracket", "page(1)", "Older", id="page-older"),
        Binding("escape", "back", "Back", id="jobs-back"),
    ]

    class Loaded(Message):
        """A page arrived from the store."""

        def __init__(self, page: JobPage) -> None:
            super().__init__()
            self.page = page

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console
        self.job_filter = JobFilter()
        self.cursors = KeysetCursors()
        self.page: JobPage | None = None
        self.filter_error: str | None = None

    @property
    def before(self) -> int | None:
        return self.cursors.before

    def compose(self) -> ComposeResult:
        yield Header()
        yield StoreBanner()
        yield Input(
            value=filter_query.render(self.job_filter),
            placeholder="/ to filter: state:dead queue:images worker:ID text",
            id="filter",
        )
        yield Static(id="jobs-status")
        yield JobsTable(id="jobs")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(JobsTable).focus()
        # The count of matching jobs comes from the overview: redraw when it changes.
        self.watch(self.app, "overview", lambda _: self._show_status())

    def on_screen_resume(self) -> None:
        self.poll()

    def on_screen_suspend(self) -> None:
        # A hidden view costs the store nothing: its poll stops until it is shown again.
        self.workers.cancel_group(self, "poll-jobs")
        self.console.report_problem("jobs", None)

    @work(exclusive=True, group="poll-jobs")
    async def poll(self) -> None:
        """Fetch the current page, post it, sleep; again until cancelled."""
        await poll_pages(
            self.console,
            "jobs",
            lambda: self.console.source.job_page(self.job_filter, before=self.before),
            lambda page: self.post_message(self.Loaded(page)),
        )

    def on_jobs_screen_loaded(self, message: JobsScreen.Loaded) -> None:
        page = message.page
        # A page asked for before the filter or the page changed is stale.
        if page.job_filter != self.job_filter or page.before != self.before:
            return
        self.page = page
        self.query_one(JobsTable).show(page.jobs, self.console.clock)
        self._show_status()

    def apply_filter(self, job_filter: JobFilter) -> None:
        """List the jobs ``job_filter`` matches, from the newest page."""
        self.job_filter = job_filter
        self.cursors.reset()
        self.page = None
        self.filter_error = None
        if self.is_mounted:
            filter_input = self.query_one("#filter", Input)
            filter_input.value = filter_query.render(job_filter)
            filter_input.remove_class("-invalid")
            self._show_status()
            self.poll()

    def _show_status(self) -> None:
        status = Text()
        if self.filter_error is not None:
            error = states.theme_style(self.app, "error", bold=True)
            status.append(f"{self.filter_error} (enter a new filter; esc keeps this list)  ", error)
        described = filter_query.render(self.job_filter) or "every job"
        status.append("Showing ", style="bold").append(described).append(self._page_note())
        self.query_one("#jobs-status", Static).update(status)

    def _page_note(self) -> str:
        """What the status line says of the page shown, after the filter."""
        page, paged = self.page, self.before is not None
        if page is not None and not paged and not page.has_more:
            # One page holds every matching job: its length is the count, exact
            # even where the queue counts cannot tell, and there is no paging
            # to speak of.
            count = len(page.jobs)
            return (
                f"  ·  {count:,} job{'' if count == 1 else 's'}"
                if count
                else "  ·  no matching jobs"
            )
        matching = self._matching_count()
        note = f" ({matching:,} in all)" if matching is not None else ""
        if paged or page is not None:
            note += f"  ·  page {self.cursors.page_number}"
        if paged:
            note += f", older than #{self.before}"
        if page is None:
            return f"{note}  ·  loading…"
        if page.jobs:
            note += f"  ·  #{page.jobs[0].id}…#{page.jobs[-1].id}"
        else:
            note += "  ·  no matching jobs"
        return note + ("  ·  ] older" if page.has_more else "  ·  oldest page")

    def _matching_count(self) -> int | None:
        """How many jobs match, when the queue counts can tell (no worker, workflow or text)."""
        job_filter = self.job_filter
        overview = self.console.overview
        if job_filter.worker_id or job_filter.text or job_filter.workflow_id or overview is None:
            return None
        if overview.activity is None:
            return None
        states = [job_filter.state] if job_filter.state else list(JobState)
        return sum(
            stats.counts.get(state, 0)
            for stats in overview.activity.queues
            if job_filter.queue in (None, stats.queue)
            for state in states
        )

    # -- filtering and paging

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            job_filter = filter_query.parse(event.value)
        except ValueError as exc:
            # Said where the reader is looking, and kept until the line is fixed.
            self.filter_error = str(exc)
            self.query_one("#filter", Input).add_class("-invalid")
            self._show_status()
            return
        self.apply_filter(job_filter)
        self.query_one(JobsTable).focus()

    def action_cycle_state(self) -> None:
        index = _STATE_CYCLE.index(self.job_filter.state)
        state = _STATE_CYCLE[(index + 1) % len(_STATE_CYCLE)]
        self.apply_filter(replace(self.job_filter, state=state))

    def action_clear_filter(self) -> None:
        self.apply_filter(JobFilter())

    def action_page(self, step: int) -> None:
        page = self.page
        last = page.jobs[-1].id if page is not None and page.has_more and page.jobs else None
        refused = self.cursors.step(step, last)
        if refused is not None:
            self.notify(refused)
            return
        self.page = None
        self._show_status()
        self.poll()

    def action_back(self) -> None:
        if self.query_one("#filter", Input).has_focus:
            self.query_one(JobsTable).focus()
        else:
            self.app.switch_mode("overview")

    # -- acting on jobs

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.console.open_job(int(event.row_key.value))

    def _selected(self) -> tuple[int, str] | None:
        table = self.query_one(JobsTable)
        job_id = table.cursor_job
        if job_id is None:
            self.notify("No job selected.", severity="warning")
            return None
        key = str(job_id)
        what = (
            f"job {job_id} ({table.cell_text(key, 'state')}, {table.cell_text(key, 'queue')}: "
            f"{table.cell_text(key, 'target')})"
        )
        return job_id, what

    def action_cancel_job(self) -> None:
        selected = self._selected()
        if selected is not None:
            self.console.cancel_jobs([selected[0]], selected[1])

    def action_retry_job(self) -> None:
        selected = self._selected()
        if selected is not None:
            self.console.retry_jobs([selected[0]], selected[1])

    def action_cancel_matching(self) -> None:
        self.console.cancel_matching(self.job_filter)

    def action_retry_matching(self) -> None:
        self.console.retry_matching(self.job_filter)

    def palette_commands(self) -> list[PaletteCommand]:
        """Actions on the selected job and on every job the filter matches."""
        described = filter_query.render(self.job_filter) or "every job"
        commands = [
            PaletteCommand(
                "Filter jobs…",
                "Type a filter: state:, queue:, worker:, text",
                self.action_focus_filter,
            ),
            PaletteCommand("Clear the jobs filter", "List every job", self.action_clear_filter),
            PaletteCommand(
                "Older page of jobs", "Keyset paging: the next page", lambda: self.action_page(1)
            ),
            PaletteCommand("Newer page of jobs", "Back one page", lambda: self.action_page(-1)),
            PaletteCommand(
                "Cancel every matching job…",
                f"Queued and running jobs of: {described}",
                self.action_cancel_matching,
            ),
            PaletteCommand(
                "Retry every matching job…",
                f"Failed, dead and cancelled jobs of: {described}",
                self.action_retry_matching,
            ),
        ]
        job_id = self.query_one(JobsTable).cursor_job
        if job_id is not None:
            commands += [
                PaletteCommand(
                    f"Open job {job_id}",
                    "Payload, timeline, attempts, output",
                    lambda: self.console.open_job(job_id),
                ),
                PaletteCommand(
                    f"Cancel job {job_id}…", "The job under the cursor", self.action_cancel_job
                ),
                PaletteCommand(
                    f"Retry job {job_id}…", "The job under the cursor", self.action_retry_job
                ),
            ]
        return commands
