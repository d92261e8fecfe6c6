"""The overview: the store's nodes, the queues, throughput and the workers, at a glance."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header

from taskq.app.commands import PaletteCommand
from taskq.app.console import Console
from taskq.app.source import JobFilter, Overview
from taskq.app.widgets.banner import StoreBanner
from taskq.app.widgets.tables import NodesTable, QueuesTable, WorkersTable
from taskq.app.widgets.throughput import Throughput
from taskq.app.widgets.totals import Totals


class OverviewScreen(Screen[None]):
    """Draws each overview the app polls; ``enter`` on a queue or worker lists its jobs."""

    CSS_PATH = "overview.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_pause", "Pause/resume queue", id="toggle-pause"),
    ]

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def compose(self) -> ComposeResult:
        yield Header()
        yield StoreBanner()
        yield Totals(id="totals")
        yield NodesTable(id="nodes")
        yield QueuesTable(id="queues")
        yield Throughput(id="throughput")
        yield WorkersTable(id="workers")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#nodes").border_title = "Store"
        self.query_one("#queues").border_title = "Queues (enter: their jobs, p: pause/resume)"
        minutes = self.console.source.throughput_minutes
        self.query_one(
            "#throughput"
        ).border_title = f"Attempts finished per minute, all queues, last {minutes} min"
        self.query_one("#workers").border_title = "Workers (enter: their jobs)"
        self.query_one(QueuesTable).focus()
        self.watch(self.app, "overview", self._show)

    def _show(self, overview: Overview | None) -> None:
        if overview is None:
            return
        self.query_one(Totals).show(overview)
        nodes = self.query_one(NodesTable)
        nodes.show(overview.nodes)
        if overview.embedded:
            nodes.border_title = "Store: embedded SQLite file (one machine, no replication)"
        else:
            nodes.border_title = f"Store: rqlite cluster of {len(overview.nodes)} nodes"
        activity = overview.activity
        if activity is None:
            return
        self.query_one(QueuesTable).show(activity.queues, activity.served)
        self.query_one(Throughput).show(activity.throughput)
        self.query_one(WorkersTable).show(activity.workers, activity.running, self.console.clock)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is None:
            return
        if event.data_table.id == "queues":
            self.run_worker(self.console.show_jobs(JobFilter(queue=key)))
        elif event.data_table.id == "workers":
            self.run_worker(self.console.show_jobs(JobFilter(worker_id=key)))

    def action_toggle_pause(self) -> None:
        queues = self.query_one(QueuesTable)
        queue = queues.cursor_queue
        if queue is None:
            self.notify("No queue to pause yet.", severity="warning")
            return
        self.console.set_paused(queue, not queues.paused(queue))

    def palette_commands(self) -> list[PaletteCommand]:
        """Pause or resume the queue under the cursor (every queue is in the app's list)."""
        queue = self.query_one(QueuesTable).cursor_queue
        if queue is None:
            return []
        return [
            PaletteCommand(
                f"Pause or resume queue {queue} (selected)",
                "Toggle whether workers claim this queue's jobs",
                self.action_toggle_pause,
            )
        ]
