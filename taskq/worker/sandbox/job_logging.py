"""A job's ``logging`` records on its stderr, from INFO up, unless the job logs elsewhere.

Python alone shows a job's WARNING records and drops its INFO ones (its
handler of last resort), so a job's ``log.info(...)`` would never reach its
output. A sandbox child therefore gives the root logger, once, before any
job runs, a handler writing to stderr in a plain format, and lowers the root
logger's level to INFO; a pool child's later jobs find it there and add
none. A job that configures logging itself replaces it with
``logging.basicConfig(force=True, ...)`` (plain ``basicConfig`` does nothing
once the root logger has a handler), or lowers the root logger's level to
see its DEBUG records too.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""How a record reads in a job's output: time, level, logger name, message."""


def send_records_to_stderr() -> None:
    """Give the root logger a stderr handler at INFO, unless it has a handler already."""
    root = logging.getLogger()
    if root.handlers:
        # Set up already (a pool child), or by code of the job's: theirs stands.
        return
    handler = logging.StreamHandler()  # the child's stderr: its job's output
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
