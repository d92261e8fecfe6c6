"""A job's state in its colour on a terminal, plain where the output is read by a program.

The colours follow the console's (``taskq/app/states.py``): queued in the
theme's primary blue, waiting in its secondary, running in its accent,
succeeded green, failed yellow, dead bold red, cancelled dim. They are
ANSI colours, so a terminal's own palette draws them. ``NO_COLOR`` (any
value) turns them off and ``FORCE_COLOR`` turns them on where stdout is no
terminal (https://no-color.org).
"""

from __future__ import annotations

import os
import sys

from taskq.broker.records import JobState

_CODES: dict[JobState, str] = {
    JobState.QUEUED: "34",
    JobState.WAITING: "35",
    JobState.RUNNING: "36",
    JobState.SUCCEEDED: "32",
    JobState.FAILED: "33",
    JobState.DEAD: "1;31",
    JobState.CANCELLED: "2",
}


def wanted() -> bool:
    """Whether this run's stdout takes colours."""
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


def painted(state: JobState, *, color: bool) -> str:
    """``state``'s name, in its colour when ``color``."""
    if not color:
        return state.value
    return f"\x1b[{_CODES[state]}m{state.value}\x1b[0m"
