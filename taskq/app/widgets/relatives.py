"""A job's workflow and its relatives with their states; enter opens a relative."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from taskq.app import states
from taskq.app.job_family import SHOWN, JobFamily
from taskq.app.widgets.keyed_table import Column, KeyedTable, TableRow
from taskq.broker.records import JobState


class RelativesTable(KeyedTable):
    """One row per parent (in declared order), per child (by id), for the job that spawned
    it, and per job it spawned (by id), keyed by job id."""

    COLUMNS = (
        Column("relation", "Relation", 8),
        Column("id", "Job", 8),
        Column("state", "State", 10),
    )

    class Chosen(Message):
        """The reader asked to open a relative (enter on its row)."""

        def __init__(self, job_id: int) -> None:
            super().__init__()
            self.job_id = job_id

    def show(self, family: JobFamily) -> None:
        """Show ``family``'s relatives."""
        self.sync([self._row(*each) for each in family.relatives])

    def _row(self, relation: str, job_id: int, state: JobState) -> TableRow:
        return TableRow(
            key=str(job_id),
            cells=(
                Text(relation),
                Text(f"#{job_id}", justify="right"),
                states.job_state(self.app, state),
            ),
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Chosen(int(event.row_key.value)))


class RelativesPanel(Vertical):
    """The workflow's name and counts per state above the relatives; hidden for a job alone."""

    def compose(self) -> ComposeResult:
        yield Static(id="family-counts")
        yield RelativesTable(id="relatives")

    def show(self, family: JobFamily) -> None:
        """Draw ``family``: its workflow in the border and above the table, its relatives in it."""
        self.display = not family.alone
        workflow = family.workflow
        if workflow is None:
            self.border_title = "Parents and children"
        else:
            self.border_title = f"Workflow {workflow.id}" + (
                f" {workflow.name!r}" if workflow.name else ""
            )
        self.border_subtitle = "enter: open" if family.relatives else ""
        self.query_one("#family-counts", Static).update(self._counts(family))
        self.query_one(RelativesTable).show(family)

    def _counts(self, family: JobFamily) -> Text:
        """``running: 2 queued, 1 waiting, 1 succeeded``, each in its colour."""
        line = Text()
        if family.workflow is not None:
            line.append_text(states.workflow_status(self.app, family.workflow.status))
            counts = family.workflow.counts
            shown = [state for state in JobState if counts.get(state)]
            for index, state in enumerate(shown):
                line.append(", " if index else ": ")
                line.append_text(
                    states.styled(
                        self.app,
                        f"{counts[state]} {state.value}",
                        states.JOB_STATE_VARIABLES[state],
                    )
                )
        if family.more:
            line.append(f"\nthe first {SHOWN} of each relation")
        return line
