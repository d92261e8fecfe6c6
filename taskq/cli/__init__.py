"""The ``taskq`` command: submit and inspect jobs, manage queues, schedules and limits.

One module per group of commands; :mod:`taskq.cli.main` builds the parser and
turns errors into one line on stderr and an exit code.
"""

from __future__ import annotations

from taskq.cli.main import main

__all__ = ["main"]
