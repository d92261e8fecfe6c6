"""The console app: views, the overview poll, the store banner, and every action.

Data comes from an injected :class:`taskq.app.source.ConsoleSource`, polled
in background workers that post messages; widgets change only in message
handlers, on the app's thread. The overview poll runs all the time (it is
also the health check behind the banner); each view polls its own data while
it is shown. Screens see the app as a :class:`taskq.app.console.Console`,
handed to each when it is made, so none imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import var

from taskq import errors
from taskq.app import filter_query
from taskq.app.commands import ConsoleCommands, PaletteCommand
from taskq.app.formatting import Clock
from taskq.app.polling import Ticker
from taskq.app.screens.confirm import ConfirmScreen
from taskq.app.screens.help import HelpScreen
from taskq.app.screens.job import JobScreen
from taskq.app.screens.jobs import JobsScreen
from taskq.app.screens.overview import OverviewScreen
from taskq.app.screens.submit import SubmitScreen
from taskq.app.screens.workflows import WorkflowsScreen
from taskq.app.source import (
    SOURCE_ERRORS,
    ConsoleSource,
    JobFilter,
    Overview,
    describe_error,
)
from taskq.broker.records import JobSpec, JobState


class ConsoleApp(App[None]):
    """``taskq-tui``: the live view of a store's nodes, queues, workers and jobs."""

    TITLE = "taskq"
    CSS_PATH = "app.tcss"
    DEFAULT_MODE = "overview"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "show_overview", "Overview", id="overview"),
        Binding("j", "show_jobs", "Jobs", id="jobs"),
        Binding("w", "show_workflows", "Workflows", id="workflows"),
        Binding("n", "submit", "Submit", id="submit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("colon", "command_palette", "Commands", id="commands"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    overview: var[Overview | None] = var(None)
    """The last overview polled, for every screen that shows part of it."""
    problem: var[str | None] = var(None)
    """Why the store cannot be trusted now (unreachable, no leader), or None."""

    class OverviewLoaded(Message):
        """An overview arrived from the store."""

        def __init__(self, overview: Overview) -> None:
            super().__init__()
            self.overview = overview

    def __init__(
        self,
        source: ConsoleSource,
        *,
        refresh_seconds: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.clock = clock or Clock()
        self.ticker = Ticker(refresh_seconds)
        self._problems: dict[str, str] = {}
        # Each screen is handed the app as the Console it may ask things of:
        # the modes are added here, where there is an app to hand.
        self.add_mode("overview", partial(OverviewScreen, self))
        self.add_mode("jobs", partial(JobsScreen, self))
        self.add_mode("workflows", partial(WorkflowsScreen, self))

    def on_mount(self) -> None:
        self.sub_title = self.source.url
        self.poll_overview()

    @work(exclusive=True, group="poll-overview")
    async def poll_overview(self) -> None:
        """Fetch the overview, post it, sleep; for as long as the app runs."""
        while True:
            overview = await self.source.overview()
            self.post_message(self.OverviewLoaded(overview))
            await self.ticker.sleep()

    def on_console_app_overview_loaded(self, message: OverviewLoaded) -> None:
        self.overview = message.overview
        self.report_problem("overview", message.overview.problem)

    def report_problem(self, origin: str, problem: str | None) -> None:
        """Record what a poll found wrong (None: all is well); the banner shows the first."""
        if problem is None:
            self._problems.pop(origin, None)
        else:
            self._problems[origin] = problem
        self.problem = next(iter(self._problems.values()), None)

    def refresh_now(self) -> None:
        """Poll everything shown now, without waiting for the next tick."""
        self.ticker.wake_all()

    # -- navigation

    def action_show_overview(self) -> None:
        self.switch_mode("overview")

    def action_show_workflows(self) -> None:
        self.switch_mode("workflows")

    async def action_show_jobs(self) -> None:
        await self.show_jobs()

    async def show_jobs(self, job_filter: JobFilter | None = None) -> None:
        """Go to the jobs list (closing an open job), filtered by ``job_filter`` if given."""
        await self.switch_mode("jobs")
        while len(self.screen_stack) > 1:
            await self.pop_screen()
        screen = self.screen
        if job_filter is not None and isinstance(screen, JobsScreen):
            screen.apply_filter(job_filter)

    def open_job(self, job_id: int) -> None:
        """Show one job in full."""
        self.push_screen(JobScreen(self, job_id))

    def action_help(self) -> None:
        screen = self.screen
        keys = [
            (
                self.get_key_display(active.binding),
                active.binding.description,
                active.binding.id or "",
            )
            for active in screen.active_bindings.values()
            # The console's own bindings carry ids; the table's arrows need no help.
            if active.binding.id and active.binding.description
        ]
        keys.append(
            ("enter", "Open the row: a job, or the jobs of a queue, worker or workflow", "")
        )
        keys.append(("ctrl+p", "Command palette: every action by name", ""))
        view = type(screen).__name__.removesuffix("Screen").lower()
        self.push_screen(HelpScreen(f"taskq console: the keys of the {view} view", keys))

    # -- actions: each asks first when it destroys or disturbs work

    def cancel_jobs(self, job_ids: Sequence[int], what: str) -> None:
        """Ask, then cancel: queued jobs at once, running ones at their next heartbeat."""
        question = f"Cancel {what}?"
        detail = (
            "A queued job is cancelled now; a running job stops at its worker's next heartbeat."
        )
        self._confirm(question, detail, "Cancel", partial(self._cancel, list(job_ids)))

    def retry_jobs(self, job_ids: Sequence[int], what: str) -> None:
        """Ask, then queue failed, dead or cancelled jobs again."""
        question = f"Retry {what}?"
        detail = "Only failed, dead or cancelled jobs move: they are queued to run again now."
        self._confirm(question, detail, "Retry", partial(self._retry, list(job_ids)))

    def cancel_matching(self, job_filter: JobFilter) -> None:
        """Ask, then cancel every queued or running job the filter matches."""
        described = filter_query.render(job_filter) or "every job"
        self._confirm(
            f"Cancel every queued or running job matching: {described}?",
            "This can stop a lot of work; it cannot be undone (retry re-runs cancelled jobs).",
            "Cancel all",
            partial(self._bulk, job_filter, cancel=True),
        )

    def retry_matching(self, job_filter: JobFilter) -> None:
        """Ask, then retry every failed, dead or cancelled job the filter matches."""
        described = filter_query.render(job_filter) or "every job"
        self._confirm(
            f"Retry every failed, dead or cancelled job matching: {described}?",
            "Each is queued to run again now.",
            "Retry all",
            partial(self._bulk, job_filter, cancel=False),
        )

    def set_paused(self, queue: str, paused: bool) -> None:
        """Pause a queue (after asking: it stops work being claimed) or resume it at once."""
        if paused:
            self._confirm(
                f"Pause queue {queue}?",
                "Workers stop claiming its jobs; running jobs finish. Resume with p again.",
                "Pause",
                partial(self._set_paused, queue, True),
            )
        else:
            self._set_paused(queue, False)

    def action_submit(self) -> None:
        def submitted(spec: JobSpec | None) -> None:
            if spec is not None:
                self._submit(spec)

        self.push_screen(SubmitScreen(self.source.functions), submitted)

    def _confirm(self, question: str, detail: str, label: str, then: Callable[[], object]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(question, detail, confirm_label=label), answered)

    @work(group="actions")
    async def _cancel(self, job_ids: list[int]) -> None:
        try:
            result = await self.source.cancel(job_ids)
        except SOURCE_ERRORS as exc:
            self.notify(describe_error(exc), title="Cancel failed", severity="error")
            return
        except errors.JobNotFound as exc:
            self._gone(exc, "Cancel failed")
            return
        if result.cancelled:
            self.notify(f"Cancelled {_ids(result.cancelled)}.")
        if result.requested:
            self.notify(f"Asked {_ids(result.requested)} to stop at the next heartbeat.")
        if not result.cancelled and not result.requested:
            self.notify("Nothing to cancel: the job is not queued or running.", severity="warning")
        self.refresh_now()

    @work(group="actions")
    async def _retry(self, job_ids: list[int]) -> None:
        try:
            moved = await self.source.retry(job_ids)
        except SOURCE_ERRORS as exc:
            self.notify(describe_error(exc), title="Retry failed", severity="error")
            return
        except errors.JobNotFound as exc:
            self._gone(exc, "Retry failed")
            return
        if moved:
            self.notify(f"Queued {_ids(moved)} again.")
        else:
            self.notify(
                "Nothing to retry: only failed, dead or cancelled jobs can.", severity="warning"
            )
        self.refresh_now()

    def _gone(self, exc: errors.JobNotFound, title: str) -> None:
        """The action met a job pruned since it was listed: its write moved none (the pages
        a bulk action had done before stay done); the client names the job."""
        self.notify(f"{exc}: it is gone since it was shown.", title=title, severity="warning")
        self.refresh_now()

    @work(group="actions")
    async def _bulk(self, job_filter: JobFilter, *, cancel: bool) -> None:
        verb = "cancel" if cancel else "retry"
        self.notify(f"Bulk {verb} of the matching jobs started…")
        try:
            if cancel:
                result = await self.source.cancel_matching(job_filter)
            else:
                result = await self.source.retry_matching(job_filter)
        except SOURCE_ERRORS as exc:
            self.notify(describe_error(exc), title=f"Bulk {verb} failed", severity="error")
            return
        except errors.JobNotFound as exc:
            self._gone(exc, f"Bulk {verb} failed")
            return
        done = "cancelled or asked to stop" if cancel else "queued again"
        self.notify(f"{result.changed:,} of {result.matched:,} matching jobs {done}.")
        self.refresh_now()

    @work(group="actions")
    async def _set_paused(self, queue: str, paused: bool) -> None:
        try:
            await self.source.set_paused(queue, paused)
        except SOURCE_ERRORS as exc:
            self.notify(describe_error(exc), title="Pause/resume failed", severity="error")
            return
        self.notify(f"Queue {queue} {'paused' if paused else 'resumed'}.")
        self.refresh_now()

    @work(group="actions")
    async def _submit(self, spec: JobSpec) -> None:
        try:
            job_id = await self.source.submit(spec)
        except errors.TaskqError as exc:
            self.notify(str(exc), title="Submit failed", severity="error")
            return
        self.notify(f"Submitted job {job_id} to queue {spec.queue}.")
        self.refresh_now()

    # -- the command palette

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands that make sense anywhere: views, filters, queues, submit, help."""
        commands = [
            PaletteCommand("Overview", "Store nodes, queues, workers", self.action_show_overview),
            PaletteCommand("Jobs", "The jobs list", self.show_jobs),
            PaletteCommand(
                "Submit a job…", "Target, JSON arguments, queue, priority", self.action_submit
            ),
            PaletteCommand("Refresh now", "Poll the store without waiting", self.refresh_now),
            PaletteCommand("Help", "Keys, filter syntax, colours", self.action_help),
        ]
        for state in JobState:
            commands.append(
                PaletteCommand(
                    f"Jobs: state {state.value}",
                    f"List the {state.value} jobs",
                    partial(self.show_jobs, JobFilter(state=state)),
                )
            )
        activity = self.overview.activity if self.overview else None
        for stats in activity.queues if activity else ():
            queue = stats.queue
            commands.append(
                PaletteCommand(
                    f"Jobs: queue {queue}",
                    f"List the jobs of {queue}",
                    partial(self.show_jobs, JobFilter(queue=queue)),
                )
            )
            verb = "Resume" if stats.paused else "Pause"
            commands.append(
                PaletteCommand(
                    f"{verb} queue {queue}",
                    "Workers claim from unpaused queues only",
                    partial(self.set_paused, queue, not stats.paused),
                )
            )
        for worker in activity.workers if activity else ():
            commands.append(
                PaletteCommand(
                    f"Jobs: worker {worker.name} ({worker.id})",
                    f"Jobs run by this worker on {worker.host}",
                    partial(self.show_jobs, JobFilter(worker_id=worker.id)),
                )
            )
        return commands


def _ids(job_ids: Sequence[int]) -> str:
    shown = ", ".join(str(job_id) for job_id in job_ids[:5])
    more = f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else ""
    return f"job{'s' if len(job_ids) > 1 else ''} {shown}{more}"
