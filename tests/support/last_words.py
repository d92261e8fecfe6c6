"""Jobs that say something just before they end: a last progress, or an error from deep inside."""

from __future__ import annotations

import asyncio

import taskq
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


def parse_line(line: str) -> int:
    return int(line)


def fail_in_a_helper(line: str) -> int:
    """Fail in a function of its own, the error wrapped in another: a chain of two."""
    try:
        return parse_line(line)
    except ValueError as exc:
        raise LastWordsFailed(f"cannot parse {line!r}") from exc


async def fail_in_an_async_helper(line: str) -> int:
    """``fail_in_a_helper``, awaited on the child's event loop."""
    await asyncio.sleep(0)
    return fail_in_a_helper(line)


@taskq.job
def declared_bad_progress() -> None:
    """A declared job (called through taskq's wrapper) that fails inside taskq's own code."""
    taskq.job_context.current_job().progress(2.0)
