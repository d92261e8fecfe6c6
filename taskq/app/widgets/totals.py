"""One line of totals: jobs per state, workers, busy slots, and who leads the store."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.widgets import Static

from taskq.app import states
from taskq.app.source import Overview
from taskq.broker.records import JobState


class Totals(Static):
    """Totals across every queue and worker of the last overview."""

    def show(self, overview: Overview) -> None:
        """Draw the totals of ``overview``."""
        app = self.app
        store = Text()
        leader = overview.leader
        if overview.embedded:
            store.append("Store ", style="bold").append("embedded SQLite")
        elif leader is not None:
            store.append("Leader ", style="bold").append(
                leader.id, style=states.theme_style(app, "success", bold=True)
            )
        else:
            store.append("Leader ", style="bold").append(
                "none", style=states.theme_style(app, "error", bold=True)
            )
        reachable = sum(node.reachable for node in overview.nodes)
        store.append(f"  {reachable}/{len(overview.nodes)} nodes up")
        activity = overview.activity
        if activity is None:
            self.update(_Parts([store]))
            return
        jobs = Text("Jobs ", style="bold")
        for index, state in enumerate(JobState):
            count = sum(stats.counts.get(state, 0) for stats in activity.queues)
            if index:
                jobs.append(" · ")
            variable = states.JOB_STATE_VARIABLES[state]
            jobs.append(f"{count:,} {state.value}", style=states.theme_style(app, variable))
        live = [worker for worker in activity.workers if worker.state in {"active", "draining"}]
        lost = sum(worker.state == "lost" for worker in activity.workers)
        busy = sum(worker.running for worker in live)
        slots = sum(worker.slots for worker in live)
        workers = Text("Workers ", style="bold").append(f"{len(live)} up")
        if lost:
            workers.append(" · ").append(
                f"{lost} lost", style=states.theme_style(app, "error", bold=True)
            )
        workers.append(f" · {busy}/{slots} slots busy")
        self.update(_Parts([store, jobs, workers]))


class _Parts:
    """Parts of the totals on one line while it has the room, else a line each.

    Wrapped as plain text, a narrow terminal would break a part in the middle
    (``3 up · 1`` on one line, ``lost`` on the next).
    """

    GAP = "   "

    def __init__(self, parts: Sequence[Text]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = Text()
        for part in self.parts:
            if line and line.cell_len + len(self.GAP) + part.cell_len > options.max_width:
                yield line
                line = Text()
            elif line:
                line.append(self.GAP)
            line.append_text(part)
        yield line
