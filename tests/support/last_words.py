"""Jobs that say something just before they end: a last progress."""

from __future__ import annotations

import taskq.job_context


class LastWordsFailed(Exception):
    """The error these jobs end with on purpose."""


def progress_and_return(count: int) -> int:
    """Report all of its work done, then end at once (as README's count_words does)."""
    taskq.job_context.current_job().progress(1.0, f"{count} lines read")
    return count


def progress_and_fail(count: int) -> None:
    """Report how far it got, then fail at once."""
    taskq.job_context.current_job().progress(0.5, f"{count} lines read")
    raise LastWordsFailed(f"stopped after {count} lines")
