"""The typed listing of jobs: which ones ``client.list`` returns, on the store or over HTTP."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

import msgspec

from taskq.broker.records import JobState
from taskq.close_names import did_you_mean

P = ParamSpec("P")
R = TypeVar("R")


class JobQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which jobs :meth:`Operations.list` returns: every filter given, newest first.

    ``state`` is a :class:`taskq.JobState` or its name (``state="succeeded"``);
    ``text`` matches a queue name exactly or any part of the payload. Pass
    the last id seen as ``before`` for the next page of ``limit`` (1 to 1000:
    :meth:`Operations.list` raises :class:`taskq.errors.InvalidJob` for another).
    """

    state: JobState | str | None = None
    queue: str | None = None
    worker_id: str | None = None
    submitter: str | None = None
    text: str | None = None
    workflow_id: int | None = None
    before: int | None = None
    limit: int = 50


def filters_in_a_query(listing: Callable[P, R]) -> Callable[P, R]:
    """``listing`` (``client.list``, on the store or over HTTP), refusing the filters given
    as its own keywords, ``client.list(state="failed")``, with how to give them.

    The keywords stay out of the listing's signature, so that a type checker flags such a
    call too; Python's own refusal would name the keyword, not the JobQuery it belongs in.
    """

    @functools.wraps(listing)
    def listed(*args: P.args, **kwargs: P.kwargs) -> R:
        misplaced = [name for name in kwargs if name != "query"]
        if misplaced:
            raise TypeError(_misplaced_filters(misplaced, kwargs))
        return listing(*args, **kwargs)

    return listed


def _misplaced_filters(names: list[str], given: Mapping[str, object]) -> str:
    fields = JobQuery.__struct_fields__
    unknown = [name for name in names if name not in fields]
    if unknown:
        return (
            f"list() has no parameter {', '.join(unknown)}"
            f"{did_you_mean(unknown, fields)}: its filters go in a taskq.JobQuery"
            f' ({", ".join(fields)}): client.list(taskq.JobQuery(state="failed"))'
        )
    example = ", ".join(f"{name}={_shown(given[name])}" for name in names)
    return f"list() takes its filters in a taskq.JobQuery: client.list(taskq.JobQuery({example}))"


def _shown(value: object) -> str:
    """``value`` as the example call would spell it."""
    if isinstance(value, JobState):
        return f"taskq.JobState.{value.name}"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value) if value is None or isinstance(value, int | float) else "..."
