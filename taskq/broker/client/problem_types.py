"""The HTTP API's errors on the wire: RFC 9457 problems, and the taskq error each one names.

Shared by the server (``taskq.server.problems`` answers a raised error as a
problem) and the HTTP client (:mod:`.http_answers` raises the error a
problem names), so a script talking to ``taskq serve`` catches the same
exceptions, with the same messages, as one on the store. A problem's
``type`` is ``urn:taskq:problem:`` and the exception class's name.
"""

from __future__ import annotations

import msgspec

from taskq import errors

PROBLEM_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:taskq:problem:"
# How a request bears its token, as the server's refusal of one without says.
BEARER_HEADER = "send it as 'Authorization: Bearer TOKEN'"


# The refusals of taskq serve lived here before taskq.errors held them: the old names stay.
Unauthorized = errors.Unauthorized
Forbidden = errors.Forbidden
WrongState = errors.WrongState
ScheduleNotFound = errors.ScheduleNotFound
BadRequest = errors.BadRequest
TooLarge = errors.TooLarge


class Problem(msgspec.Struct, omit_defaults=True):
    """An RFC 9457 problem, with taskq's own members where they apply."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    job_id: int | None = None
    retry_after: float | None = None


_KNOWN: dict[str, type[errors.TaskqError]] = {
    kind.__name__: kind
    for kind in vars(errors).values()
    if isinstance(kind, type) and issubclass(kind, errors.TaskqError)
}


def error_of(problem: Problem) -> errors.TaskqError:
    """The exception a problem names, with its message and members (``field``, ``job_id``,
    ``retry_after``); a problem of no taskq class is a :class:`taskq.errors.BadRequest` (4xx)
    or a :class:`taskq.errors.StoreError` (5xx) with its detail."""
    name = problem.type.removeprefix(TYPE_PREFIX)
    kind = _KNOWN.get(name) if name != problem.type else None
    detail = problem.detail
    if kind is None:
        return (errors.BadRequest if problem.status < 500 else errors.StoreError)(
            f"{problem.status} {problem.title}: {detail}"
        )
    if issubclass(kind, errors.IdempotencyConflict):
        return kind(detail, job_id=problem.job_id or 0)
    if issubclass(kind, errors.InvalidJob | errors.InvalidSetting):
        return kind(detail, field=problem.field)
    if issubclass(kind, errors.RateLimited):
        return kind(detail, problem.retry_after)
    return kind(detail)
