"""The workflows view: a keyset-paged table of workflows, newest first, their jobs counted live."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from taskq.app.commands import PaletteCommand
from taskq.app.console import Console
from taskq.app.screens.pages import KeysetCursors, poll_pages
from taskq.app.source import JobFilter, WorkflowPage
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.tables import WorkflowsTable
from taskq.broker.records import WorkflowStatus

# What ``s`` steps through: every workflow, then those of each status.
_STATUS_CYCLE: tuple[WorkflowStatus | None, ...] = (None, *WorkflowStatus)


class WorkflowsScreen(Screen[None]):
    """Lists one keyset page of workflows (of one status, by ``s``); ``enter`` lists the
    jobs of the one selected."""

    CSS_PATH = "workflows.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "cycle_status", "Status", id="workflows-status-cycle"),
        Binding("left_square_bracket", "page(-1)", "Newer", id="workflows-newer"),
        Binding("right_square_bracket", "page(1)", "Older", id="workflows-older"),
        Binding("escape", "back", "Back", id="workflows-back"),
    ]

    class Loaded(Message):
        """A page arrived from the store."""

        def __init__(self, page: WorkflowPage) -> None:
            super().__init__()
            self.page = page

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console
        self.cursors = KeysetCursors()
        self.status: WorkflowStatus | None = None
        self.page: WorkflowPage | None = None

    @property
    def before(self) -> int | None:
        return self.cursors.before

    def compose(self) -> ComposeResult:
        yield Header()
        yield StoreBanner()
        yield Static(id="workflows-status")
        yield WorkflowsTable(id="workflows")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(WorkflowsTable).focus()
        self._show_status()

    def on_screen_resume(self) -> None:
        self.poll()

    def on_screen_suspend(self) -> None:
        # A hidden view costs the store nothing: its poll stops until it is shown again.
        self.workers.cancel_group(self, "poll-workflows")
        self.console.report_problem("workflows", None)

    @work(exclusive=True, group="poll-workflows")
    async def poll(self) -> None:
        """Fetch the current page, post it, sleep; again until cancelled."""
        await poll_pages(
            self.console,
            "workflows",
            lambda: self.console.source.workflow_page(before=self.before, status=self.status),
            lambda page: self.post_message(self.Loaded(page)),
        )

    def on_workflows_screen_loaded(self, message: WorkflowsScreen.Loaded) -> None:
        if (message.page.before, message.page.status) != (self.before, self.status):
            return  # asked for before the page or the status changed
        self.page = message.page
        self.query_one(WorkflowsTable).show(message.page.workflows, self.console.clock)
        self._show_status()

    def _show_status(self) -> None:
        status = Text()
        status.append("Workflows", style="bold")
        if self.status is not None:
            status.append(f" {self.status.value}", style="bold")
        status.append(", newest first")
        page = self.page
        if self.before is not None:
            status.append(f"  ·  page {self.cursors.page_number}, older than #{self.before}")
        if page is None:
            status.append("  ·  loading…")
        elif not page.workflows:
            status.append("  ·  none")
        else:
            status.append(f"  ·  #{page.workflows[0].id}…#{page.workflows[-1].id}")
            status.append("  ·  ] older" if page.has_more else "  ·  oldest page")
        self.query_one("#workflows-status", Static).update(status)

    def action_page(self, step: int) -> None:
        page = self.page
        last = page.workflows[-1].id if page is not None and page.has_more else None
        refused = self.cursors.step(step, last)
        if refused is not None:
            self.notify(refused)
            return
        self.page = None
        self._show_status()
        self.poll()

    def action_cycle_status(self) -> None:
        """The workflows of the next status in turn (all of them after the last)."""
        index = _STATUS_CYCLE.index(self.status)
        self.status = _STATUS_CYCLE[(index + 1) % len(_STATUS_CYCLE)]
        self.cursors.reset()
        self.page = None
        self._show_status()
        self.poll()

    def action_back(self) -> None:
        self.app.switch_mode("overview")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            workflow = int(event.row_key.value)
            self.run_worker(self.console.show_jobs(JobFilter(workflow_id=workflow)))

    def palette_commands(self) -> list[PaletteCommand]:
        """Paging, and the jobs of the workflow under the cursor."""
        commands = [
            PaletteCommand(
                "Older page of workflows",
                "Keyset paging: the next page",
                lambda: self.action_page(1),
            ),
            PaletteCommand(
                "Newer page of workflows", "Back one page", lambda: self.action_page(-1)
            ),
            PaletteCommand(
                "Workflows of the next status",
                "All, running, succeeded, failed, cancelled, in turn (the key s)",
                self.action_cycle_status,
            ),
        ]
        key = self.query_one(WorkflowsTable).cursor_key
        if key is not None:
            workflow = int(key)
            commands.append(
                PaletteCommand(
                    f"Jobs of workflow {workflow}",
                    "The jobs list, filtered to this workflow",
                    lambda: self.run_worker(
                        self.console.show_jobs(JobFilter(workflow_id=workflow))
                    ),
                )
            )
        return commands
