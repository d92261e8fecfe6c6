"""The panels of one job: its payload, options, timeline and result, and an attempt's output."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from taskq.app import formatting
from taskq.app.formatting import Clock
from taskq.broker.records import Execution, Job, JobState


class PayloadPanel(Static):
    """The payload of one job, exactly as stored."""

    def show(self, job: Job) -> None:
        """Draw ``job``'s payload."""
        self.border_title = f"Payload ({job.kind.value})"
        self.update(Text(json.dumps(job.payload, indent=2, ensure_ascii=False)))


class OptionsPanel(Static):
    """The options one job was submitted with."""

    def show(self, job: Job) -> None:
        """Draw ``job``'s options."""
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        rows = [
            ("queue", job.queue),
            ("priority", str(job.priority)),
            ("attempts", f"{job.attempts} of {job.max_attempts}"),
            ("timeout", formatting.duration(job.timeout)),
            ("limits", formatting.compact_json(job.limits) if job.limits else "-"),
            ("labels", ", ".join(job.labels) or "-"),
            ("key", job.idempotency_key),
            ("submitter", job.submitter or "-"),
        ]
        for name, value in rows:
            table.add_row(name, Text(value))
        self.update(table)


class TimelinePanel(Static):
    """When things happened to one job, as times and as ages."""

    def show(self, job: Job, clock: Clock) -> None:
        """Draw ``job``'s timeline, ages taken from ``clock``."""
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)

        def moment(name: str, when: float | None) -> None:
            if when is not None:
                age = clock.ago(when)
                table.add_row(name, clock.at(when), age if age.startswith("in ") else f"{age} ago")

        moment("created", job.created_at)
        moment("run at", job.run_at)
        moment("started", job.started_at)
        moment("finished", job.finished_at)
        if job.started_at is not None and job.finished_at is not None:
            table.add_row("took", formatting.duration(job.finished_at - job.started_at), "")
        if job.state is JobState.RUNNING:
            moment("lease until", job.lease_until)
            table.add_row("worker", Text(job.worker_id or "-"), "")
        if job.progress is not None:
            note = Text(f"{job.progress:.0%} {job.progress_message or ''}".strip())
            table.add_row("progress", note, "")
        if job.cancel_requested:
            table.add_row("cancel", "requested: stops at the next heartbeat", "")
        self.update(table)


class ResultPanel(Static):
    """What one job came to: its result, or the error it ended with.

    An error's traceback belongs to the attempt that raised it: it is drawn
    once, in that attempt's output (``AttemptOutput``), not again here. A job
    queued or running again keeps an earlier attempt's error on its record
    until the next attempt ends: that error is said as the earlier attempt's,
    under "none yet", never as the job's last word while a new attempt may
    still succeed.
    """

    def show(self, job: Job) -> None:
        """Draw ``job``'s result or error."""
        if job.state is JobState.SUCCEEDED:
            self.border_title = "Result"
            self.update(Text(json.dumps(job.result, indent=2, ensure_ascii=False)))
        elif job.error and job.state.finished:
            self.border_title = "Last error"
            lines = [_error_headline(job.error)]
            if job.error.get("traceback"):
                lines.append(Text("traceback: in the attempt's output", style="dim"))
            self.update(Group(*lines))
        else:
            self.border_title = "Result"
            lines = [Text(f"none yet: the job is {job.state.value}")]
            earlier = _earlier_attempts_error(job)
            if earlier is not None:
                lines.append(Text(f"an earlier attempt failed: {_one_line(earlier)}", style="dim"))
            self.update(Group(*lines))


# Errors a job's record holds that no attempt left: a cancel's and a parent's end's. A
# retry takes the job out of them, and they say nothing about its attempts.
_NOT_AN_ATTEMPTS = frozenset({"Cancelled", "ParentFailed"})


def _earlier_attempts_error(job: Job) -> dict[str, Any] | None:
    """The error an earlier attempt left on the record of a job not yet ended, if any."""
    error = job.error
    if not error or job.state.finished or not job.attempts:
        return None
    return None if error.get("type") in _NOT_AN_ATTEMPTS else error


_SHOWN_ELSEWHERE = frozenset({"type", "message", "traceback", "status"})


class AttemptOutput(Static):
    """Output of one execution, then its error (with its traceback); empty until it has one.

    The output is read from what the attempt stores as it runs, so a running
    attempt's grows with each poll. This is the text only: ``OutputPanel``
    holds it, scrolls it and keeps it at its end.
    """

    def show(self, execution: Execution | None) -> None:
        """Draw ``execution``'s output, or say there is none yet."""
        if execution is None:
            self.update(Text("no attempt yet"))
            return
        parts: list[Text] = []
        if execution.log_tail:
            live = execution.finished_at is None
            parts.append(Text(f"── output ({'live' if live else 'tail'}) ──", style="bold"))
            parts.extend(_last_lines(execution))
        if execution.error:
            # After the output, as a terminal shows a crash: the panel opens at its end,
            # so where the attempt failed is the first thing its reader sees.
            error = execution.error
            if parts:
                parts.append(Text("── error ──", style="bold"))
            # A traceback ends with the error's own line: the headline would repeat it.
            traceback = str(error.get("traceback") or "").rstrip()
            parts.append(Text(traceback) if traceback else _error_headline(error))
            # The status is the attempt's outcome, in the attempts table already.
            extra = {k: v for k, v in error.items() if k not in _SHOWN_ELSEWHERE}
            for key, value in extra.items():
                parts.append(Text(f"{key}: {formatting.compact_json(value)}", style="dim"))
        if not parts:
            running = execution.finished_at is None
            parts.append(Text("running: no output recorded yet" if running else "no output"))
        if execution.outcome == _RELEASED:
            # Its number comes again in the next row: say that it cost no attempt, and
            # why, where its record does not (hand-backs stored before they kept why).
            said_why = bool(execution.error)
            parts.append(Text(_NOT_COUNTED if said_why else _HANDED_BACK, style="dim"))
        self.update(Group(*parts))


_RELEASED = "released"
"""The outcome of an attempt its worker handed back (a drain, a job claimed ahead that no
slot started, a function it may not run), which uses no attempt."""

_NOT_COUNTED = "not counted, so the job's next run has this attempt's number again"
_HANDED_BACK = f"handed back by its worker unrun or unfinished (a drain, say): {_NOT_COUNTED}"


MOST_LINES = 500
"""Lines of an attempt's output drawn at most: its tail (at most 64 KiB) can hold
tens of thousands of short ones, and each is wrapped again whenever the output
grows, which must stay quick while a chatty job runs."""


def _last_lines(execution: Execution) -> list[Text]:
    """The end of ``execution``'s output, at most ``MOST_LINES`` lines, saying if cut."""
    lines = (execution.log_tail or "").rstrip().split("\n")
    if len(lines) <= MOST_LINES:
        return [Text("\n".join(lines))]
    note = (
        f"… its last {MOST_LINES:,} lines: "
        f"taskq logs {execution.job_id} --attempt {execution.attempt} prints all that is kept"
    )
    return [Text(note, style="dim"), Text("\n".join(lines[-MOST_LINES:]))]


def _error_headline(error: dict[str, Any]) -> Text:
    """An error as a worker reports it, in one bold line: ``Type: message``."""
    return Text(f"{error.get('type', 'Error')}: {error.get('message', '')}", style="bold")


def _one_line(error: dict[str, Any]) -> str:
    """An error as ``Type: message``, on one line."""
    line = f"{error.get('type', 'Error')}: {error.get('message', '')}"
    return " ".join(line.split())
