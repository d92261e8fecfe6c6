"""States drawn in the colours of the current theme ($success, $error, ...).

Table cells are Rich text, which knows nothing of Textual's CSS variables,
so each colour is looked up in the running theme when a cell is drawn: a
theme switch recolours every table at the next poll.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color, ColorParseError

from taskq.broker.records import JobState, WorkflowStatus

JOB_STATE_VARIABLES: dict[JobState, str] = {
    JobState.QUEUED: "primary",
    JobState.WAITING: "secondary",
    JobState.RUNNING: "accent",
    JobState.SUCCEEDED: "success",
    JobState.FAILED: "warning",
    JobState.DEAD: "error",
    JobState.CANCELLED: "foreground-darken-2",
}

WORKFLOW_STATUS_VARIABLES: dict[WorkflowStatus, str] = {
    WorkflowStatus.RUNNING: "accent",
    WorkflowStatus.SUCCEEDED: "success",
    WorkflowStatus.FAILED: "error",
    WorkflowStatus.CANCELLED: "foreground-darken-2",
}

WORKER_STATE_VARIABLES: dict[str, str] = {
    "active": "success",
    "draining": "warning",
    "stopped": "foreground-darken-2",
    "lost": "error",
}


def theme_style(app: App[Any], variable: str, *, bold: bool = False) -> Style:
    """A Rich style in the colour of the theme variable ``variable`` (without the ``$``)."""
    try:
        color = Color.parse(app.theme_variables[variable])
    except (KeyError, ColorParseError):
        return Style(bold=bold)
    return Style(color=color.rich_color, bold=bold)


def styled(app: App[Any], text: str, variable: str, *, bold: bool = False) -> Text:
    """``text`` in the colour of a theme variable."""
    return Text(text, style=theme_style(app, variable, bold=bold))


def job_state(app: App[Any], state: JobState, *, cancel_requested: bool = False) -> Text:
    """A job's state in its colour; a running job asked to stop says so."""
    label = "cancelling" if cancel_requested and state is JobState.RUNNING else state.value
    return styled(app, label, JOB_STATE_VARIABLES[state], bold=state is JobState.DEAD)


def workflow_status(app: App[Any], status: WorkflowStatus) -> Text:
    """A workflow's status in its colour."""
    return styled(app, status.value, WORKFLOW_STATUS_VARIABLES[status])


def worker_state(app: App[Any], state: str) -> Text:
    """A worker's state in its colour; a lost worker is written loud."""
    variable = WORKER_STATE_VARIABLES.get(state, "foreground")
    return styled(app, state.upper() if state == "lost" else state, variable, bold=state == "lost")
