"""The console's tables: store nodes, queues, workers, pages of jobs and workflows, attempts.

Each declares its columns (their usual width, and where their text may be cut
when the terminal is narrow) and how one record becomes a row, whole;
:class:`KeyedTable` keeps the rows in step with every poll and fits them to
the width it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from taskq import humanize
from taskq.app import formatting, states
from taskq.app.formatting import Clock
from taskq.app.widgets.keyed_table import Column, KeyedTable, TableRow
from taskq.broker import worker_policy
from taskq.broker.client import declarations
from taskq.broker.records import Execution, Job, JobState, QueueStats, WorkerInfo, WorkflowInfo
from taskq.broker.stores.store import NodeInfo


class NodesTable(KeyedTable):
    """One row per store node, keyed by node id."""

    COLUMNS = (
        Column("id", "Node", 12, elide="middle"),
        Column("address", "Address", 34, elide="middle"),
        Column("role", "Role", 10),
        Column("reachable", "Reachable", 9),
        Column("raft", "Raft state", 26, elide="end"),
        Column("version", "Version", 13, elide="end"),
    )

    def show(self, nodes: Sequence[NodeInfo]) -> None:
        """Replace what the table shows with ``nodes``, row by row."""
        self.sync([self._row(node) for node in nodes])

    def _row(self, node: NodeInfo) -> TableRow:
        app = self.app
        if node.leader:
            role = states.styled(app, "★ leader", "success", bold=True)
        else:
            role = Text("voter" if node.voter else "non-voter")
        if node.reachable:
            reachable = states.styled(app, "yes", "success")
        else:
            reachable = states.styled(app, "NO", "error", bold=True)
        raft = node.raft_state or node.error or "-"
        return TableRow(
            key=node.address or node.id,
            cells=(
                Text(node.id),
                Text(node.address),
                role,
                reachable,
                Text(raft, style=states.theme_style(app, "error") if node.error else ""),
                Text(node.version or "-"),
            ),
        )


class QueuesTable(KeyedTable):
    """One row per queue, keyed by its name."""

    COLUMNS = (
        Column("queue", "Queue", 20, elide="middle"),
        Column("status", "Status", 8),
        *(Column(state.value, state.value.capitalize(), 10) for state in JobState),
    )

    def show(self, queues: Sequence[QueueStats], served: frozenset[str] | None = None) -> None:
        """Replace what the table shows with ``queues``, row by row; a queue with queued jobs
        that none of the live workers (``served``: the queues they take) takes is flagged."""
        self.sync([self._row(stats, served) for stats in queues])

    @property
    def cursor_queue(self) -> str | None:
        """The queue under the cursor."""
        return self.cursor_key

    def paused(self, queue: str) -> bool:
        """Whether the table shows ``queue`` as paused."""
        return self.cell_text(queue, "status") == "paused"

    def _row(self, stats: QueueStats, served: frozenset[str] | None) -> TableRow:
        app = self.app
        if stats.paused:
            status = states.styled(app, "paused", "warning", bold=True)
        elif served is not None and declarations.queue_unserved(stats, served):
            status = states.styled(app, "unserved", "error", bold=True)
        else:
            status = states.styled(app, "active", "success")
        counts = _state_counts(self, stats.counts)
        return TableRow(key=stats.queue, cells=(Text(stats.queue), status, *counts))


def _state_counts(table: KeyedTable, counts: Mapping[JobState, int]) -> list[Text]:
    """A cell per job state, in the order of the enum: its count, in its state's colour."""
    cells = []
    for state in JobState:
        count = counts.get(state, 0)
        variable = states.JOB_STATE_VARIABLES[state] if count else "foreground-darken-3"
        cells.append(
            Text(f"{count:,}", style=states.theme_style(table.app, variable), justify="right")
        )
    return cells


class WorkersTable(KeyedTable):
    """One row per registered worker, keyed by worker id; lost workers stand out."""

    COLUMNS = (
        Column("name", "Worker", 12, elide="middle"),
        Column("id", "ID", 16, elide="middle"),
        Column("host", "Host", 12, elide="middle"),
        # What it takes and may run give way before which worker it is: at 120
        # terminal columns a default id, its host's name in it, stays whole.
        Column("labels", "Labels", 8, elide="end", cut_first=True),
        Column("queues", "Queues", 12, elide="end", cut_first=True),
        # What its policy lets it run: its modules, +python_exec, +shell; "-" when unknown.
        Column("runs", "Runs", 6, elide="end", cut_first=True),
        Column("slots", "Busy", 5),
        # An autoscaling worker's slots now and the most it may have.
        Column("capacity", "Slots", 5),
        Column("heartbeat", "Heartbeat", 9),
        Column("state", "State", 8),
        Column("jobs", "Running", 9, elide="end"),
    )

    def show(
        self,
        workers: Sequence[WorkerInfo],
        running: Mapping[str, Sequence[int]],
        clock: Clock,
    ) -> None:
        """Replace what the table shows with ``workers``, row by row."""
        self.sync([self._row(worker, running.get(worker.id, ()), clock) for worker in workers])

    def _row(self, worker: WorkerInfo, running: Sequence[int], clock: Clock) -> TableRow:
        app = self.app
        lost = worker.state == "lost"
        loud = states.theme_style(app, "error", bold=True) if lost else ""
        busy_variable = "warning" if worker.running >= worker.slots else "foreground"
        jobs = " ".join(f"#{job_id}" for job_id in running)
        return TableRow(
            key=worker.id,
            cells=(
                Text(worker.name, style=loud),
                Text(worker.id),
                Text(worker.host),
                Text(",".join(worker.labels) or "-"),
                Text(",".join(worker.queues)),
                Text(worker_policy.summary(worker.policy)),
                states.styled(app, f"{worker.running}/{worker.slots}", busy_variable),
                Text(humanize.slots(worker.slots, worker.max_slots)),
                Text(clock.ago(worker.heartbeat_at), style=loud),
                states.worker_state(app, worker.state),
                Text(jobs or "-"),
            ),
        )


class JobsTable(KeyedTable):
    """A page of jobs; rows are updated in place as the jobs move on."""

    COLUMNS = (
        Column("id", "ID", 7),
        Column("state", "State", 10),
        Column("queue", "Queue", 10, elide="middle"),
        Column("target", "Target", 26, elide="middle"),
        Column("args", "Arguments", 18, elide="end"),
        Column("tries", "Tries", 5),
        Column("worker", "Worker", 16, elide="middle"),
        Column("age", "Age", 7),
    )

    def show(self, jobs: Sequence[Job], clock: Clock) -> None:
        """Replace what the table shows with ``jobs``, row by row."""
        self.sync([self._row(job, clock) for job in jobs])

    @property
    def cursor_job(self) -> int | None:
        """The id of the job under the cursor."""
        key = self.cursor_key
        return int(key) if key is not None else None

    def _row(self, job: Job, clock: Clock) -> TableRow:
        return TableRow(
            key=str(job.id),
            cells=(
                Text(str(job.id), justify="right"),
                states.job_state(self.app, job.state, cancel_requested=job.cancel_requested),
                Text(job.queue),
                Text(formatting.target(job)),
                Text(formatting.arguments(job)),
                Text(f"{job.attempts}/{job.max_attempts}", justify="right"),
                Text(job.worker_id or "-"),
                Text(clock.ago(job.created_at), justify="right"),
            ),
        )


class WorkflowsTable(KeyedTable):
    """A page of workflows, newest first, with their status and their jobs counted by state."""

    COLUMNS = (
        Column("id", "ID", 6),
        Column("name", "Name", 16, elide="middle"),
        Column("submitter", "Submitter", 12, elide="middle"),
        Column("age", "Age", 7),
        Column("status", "Status", 9),
        Column("jobs", "Jobs", 7),
        *(Column(state.value, state.value.capitalize(), 9) for state in JobState),
    )

    def show(self, workflows: Sequence[WorkflowInfo], clock: Clock) -> None:
        """Replace what the table shows with ``workflows``, row by row."""
        self.sync([self._row(info, clock) for info in workflows])

    def _row(self, info: WorkflowInfo, clock: Clock) -> TableRow:
        return TableRow(
            key=str(info.id),
            cells=(
                Text(str(info.id), justify="right"),
                Text(info.name or "-"),
                Text(info.submitter or "-"),
                Text(clock.ago(info.created_at), justify="right"),
                states.workflow_status(self.app, info.status),
                Text(f"{sum(info.counts.values()):,}", justify="right"),
                *_state_counts(self, info.counts),
            ),
        )


# How each recorded outcome is coloured; anything else reads as a failure.
_OUTCOME_VARIABLES = {
    "succeeded": "success",
    "released": "foreground-darken-2",
    "cancelled": "foreground-darken-2",
}


class AttemptsTable(KeyedTable):
    """One row per execution of the job, keyed by execution id, oldest first."""

    COLUMNS = (
        Column("attempt", "#", 3),
        Column("worker", "Worker", 22, elide="middle"),
        Column("started", "Started", 19),
        Column("duration", "Duration", 9),
        Column("outcome", "Outcome", 14),
        Column("exit", "Exit", 6),
        Column("memory", "Peak mem", 10),
        Column("cpu", "CPU", 8),
    )

    def show(self, executions: Sequence[Execution], clock: Clock) -> None:
        """Replace what the table shows with ``executions``, row by row."""
        self.sync([self._row(execution, clock) for execution in executions])

    @property
    def cursor_execution(self) -> int | None:
        """The id of the execution under the cursor."""
        key = self.cursor_key
        return int(key) if key is not None else None

    def _row(self, execution: Execution, clock: Clock) -> TableRow:
        if execution.finished_at is None:
            outcome = states.styled(self.app, "running", "accent")
            took = clock.now() - execution.started_at
        else:
            label = execution.outcome or "?"
            outcome = states.styled(self.app, label, _OUTCOME_VARIABLES.get(label, "error"))
            took = execution.finished_at - execution.started_at
        exit_code = "-" if execution.exit_code is None else str(execution.exit_code)
        if execution.signal is not None:
            exit_code = f"sig {execution.signal}"
        return TableRow(
            key=str(execution.id),
            cells=(
                Text(str(execution.attempt), justify="right"),
                Text(execution.worker_id),
                Text(clock.at(execution.started_at)),
                Text(formatting.duration(took), justify="right"),
                outcome,
                Text(exit_code, justify="right"),
                Text(formatting.size(execution.peak_rss_bytes), justify="right"),
                Text(formatting.duration(execution.cpu_seconds), justify="right"),
            ),
        )
