"""One job in full: payload, options, timeline, attempts, their output, and the result."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from taskq.app import formatting, states
from taskq.app.commands import PaletteCommand
from taskq.app.console import Console
from taskq.app.source import SOURCE_ERRORS, JobDetail, JobFilter, describe_error
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.output_panel import OutputPanel
from taskq.app.widgets.panels import (
    OptionsPanel,
    PayloadPanel,
    ResultPanel,
    TimelinePanel,
)
from taskq.app.widgets.relatives import RelativesPanel, RelativesTable
from taskq.app.widgets.tables import AttemptsTable


class JobScreen(Screen[None]):
    """Polls one job and its attempts; ``esc`` goes back to the list."""

    CSS_PATH = "job.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="job-back"),
        Binding("c", "cancel_job", "Cancel", id="job-cancel"),
        Binding("r", "retry_job", "Retry", id="job-retry"),
        # Out of the footer, which the view's keys fill; the help lists it, and the
        # panel's border says "tab: scroll" once its output is longer than it.
        Binding(
            "l",
            "focus_output",
            "Output: focus it, to scroll with the arrows, PgUp/PgDn, Home/End",
            id="job-output",
            show=False,
        ),
    ]

    class Loaded(Message):
        """The job (or None: it no longer exists) arrived from the store."""

        def __init__(self, job_id: int, detail: JobDetail | None) -> None:
            super().__init__()
            self.job_id = job_id
            self.detail = detail

    def __init__(self, console: Console, job_id: int) -> None:
        super().__init__()
        self.console = console
        self.job_id = job_id
        self.detail: JobDetail | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield StoreBanner()
        yield Static(Text(f"Job {self.job_id}: loading…"), id="job-title")
        with Horizontal(id="job-top"):
            yield PayloadPanel(id="payload")
            yield OptionsPanel(id="options")
            yield TimelinePanel(id="timeline")
        yield AttemptsTable(id="attempts")
        with Horizontal(id="job-bottom"):
            yield OutputPanel(id="output")
            yield ResultPanel(id="result")
            yield RelativesPanel(id="family")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#options").border_title = "Options"
        self.query_one("#timeline").border_title = "Timeline"
        self.query_one("#attempts").border_title = "Attempts"
        self.query_one(AttemptsTable).focus()

    def on_screen_resume(self) -> None:
        self.poll()

    def on_screen_suspend(self) -> None:
        self.workers.cancel_group(self, "poll-job")
        self.console.report_problem("job", None)

    def on_unmount(self) -> None:
        self.console.report_problem("job", None)

    @work(exclusive=True, group="poll-job")
    async def poll(self) -> None:
        """Fetch the job and its attempts, post them, sleep; again until cancelled."""
        while True:
            try:
                detail = await self.console.source.job_detail(self.job_id)
            except SOURCE_ERRORS as exc:
                self.console.report_problem("job", describe_error(exc))
            else:
                self.console.report_problem("job", None)
                self.post_message(self.Loaded(self.job_id, detail))
            await self.console.ticker.sleep()

    def on_job_screen_loaded(self, message: JobScreen.Loaded) -> None:
        detail = message.detail
        title = self.query_one("#job-title", Static)
        if detail is None:
            title.update(Text(f"Job {self.job_id} does not exist (pruned, or a wrong id)."))
            return
        first_load = self.detail is None
        self.detail = detail
        job, clock = detail.job, self.console.clock
        line = Text()
        line.append(f"Job {job.id}  ", style="bold")
        line.append_text(
            states.job_state(self.app, job.state, cancel_requested=job.cancel_requested)
        )
        line.append(f"  {formatting.target(job)}  on queue {job.queue}")
        title.update(line)
        self.query_one(PayloadPanel).show(job)
        self.query_one(OptionsPanel).show(job)
        self.query_one(TimelinePanel).show(job, clock)
        self.query_one(ResultPanel).show(job)
        self.query_one(RelativesPanel).show(detail.family)
        attempts = self.query_one(AttemptsTable)
        attempts.show(detail.executions, clock)
        if first_load and attempts.row_count:
            # The latest attempt is the one a reader opens a job for.
            attempts.move_cursor(row=attempts.row_count - 1)
        self._show_output()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_output()

    def _show_output(self) -> None:
        if self.detail is None:
            return
        selected = self.query_one(AttemptsTable).cursor_execution
        chosen = next((e for e in self.detail.executions if e.id == selected), None)
        self.query_one(OutputPanel).show(chosen)

    def on_relatives_table_chosen(self, message: RelativesTable.Chosen) -> None:
        self.console.open_job(message.job_id)

    def action_focus_output(self) -> None:
        self.query_one(OutputPanel).focus()

    def action_back(self) -> None:
        self.dismiss(None)

    def _what(self) -> str:
        if self.detail is None:
            return f"job {self.job_id}"
        job = self.detail.job
        return f"job {job.id} ({job.state.value}, {job.queue}: {formatting.target(job)})"

    def action_cancel_job(self) -> None:
        self.console.cancel_jobs([self.job_id], self._what())

    def action_retry_job(self) -> None:
        self.console.retry_jobs([self.job_id], self._what())

    def palette_commands(self) -> list[PaletteCommand]:
        """Cancel or retry this job, or go back."""
        commands = [
            PaletteCommand(f"Cancel job {self.job_id}…", "This job", self.action_cancel_job),
            PaletteCommand(f"Retry job {self.job_id}…", "This job", self.action_retry_job),
            PaletteCommand("Back to the jobs list", "Close this job", self.action_back),
        ]
        workflow_id = self.detail.job.workflow_id if self.detail is not None else None
        if workflow_id is not None:
            commands.append(
                PaletteCommand(
                    f"Jobs of workflow {workflow_id}",
                    "List every job of this job's workflow",
                    partial(self.console.show_jobs, JobFilter(workflow_id=workflow_id)),
                )
            )
        return commands
