"""Errors as RFC 9457 problem details: the client's exception classes and messages, over HTTP.

A problem's ``type`` names the exception class (``urn:taskq:problem:JobNotFound``),
``title`` is that class's meaning (the first line of its docstring) and
``detail`` is the very message a Python client would have raised. Bad input
is a 4xx and changes nothing; a store that cannot answer is a 503 with
``Retry-After``, since nothing was applied (or, for ``OutcomeUnknown``,
a resend with the same ``Idempotency-Key`` is safe). An idempotency key that
names another workflow is a conflict as a job's is, naming the workflow
(:func:`workflow_key_taken`).
"""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from taskq import errors
from taskq.broker.client import problem_types
from taskq.broker.client.http_stream import PROBLEM_EVENT
from taskq.broker.client.problem_types import PROBLEM_TYPE, TYPE_PREFIX

# How long a client should wait before asking a store that did not answer again.
STORE_RETRY_AFTER_SECONDS = 1


class Problem(problem_types.Problem, omit_defaults=True):
    """An RFC 9457 problem, with taskq's own members where they apply: ``workflow_id``
    names the workflow an idempotency key already names, where ``job_id`` names a job."""

    workflow_id: int | None = None


# The title of a workflow's idempotency conflict: IdempotencyConflict's, of a workflow.
_WORKFLOW_KEY_TAKEN = (
    "The idempotency key already names a workflow with a different request; nothing was written."
)

# Checked in order: a subclass before its base.
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.BadRequest, 400),
    (errors.TooLarge, 413),
    (errors.IdempotencyConflict, 409),
    (errors.ScheduleExists, 409),
    (errors.WrongState, 409),
    (errors.InvalidJob, 422),
    (errors.ConfigError, 422),
    (errors.JobNotFound, 404),
    (errors.AttemptNotFound, 404),
    (errors.WorkflowNotFound, 404),
    (errors.QueueNotFound, 404),
    (errors.ScheduleNotFound, 404),
    (errors.WorkerNotFound, 404),
    (errors.RateLimited, 429),
    (errors.StoreUnavailable, 503),
    (errors.OutcomeUnknown, 503),
    (errors.SchemaBehind, 503),
    (errors.StoreError, 503),
)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a taskq error this API answers with, or None (a bug: 500)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return None


def problem_response(exc: errors.TaskqError, status: int) -> Response:
    """``exc`` as an ``application/problem+json`` response of ``status``."""
    headers: dict[str, str] = {}
    retry_after: float | None = None
    if isinstance(exc, errors.RateLimited) and exc.retry_after is not None:
        retry_after = exc.retry_after
    elif status == 503:
        retry_after = STORE_RETRY_AFTER_SECONDS
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="taskq"'
    return _response(_problem(exc, status, retry_after), headers)


def workflow_key_taken(exc: errors.IdempotencyConflict, workflow_id: int) -> Response:
    """The 409 of a workflow's idempotency key that already names another request: the
    conflict ``exc`` (whose ``job_id`` is the workflow's first job), naming the workflow
    instead, by ``workflow_id`` and in its title."""
    problem = msgspec.structs.replace(
        _problem(exc, 409, None), title=_WORKFLOW_KEY_TAKEN, job_id=None, workflow_id=workflow_id
    )
    return _response(problem, {})


def _response(problem: Problem, headers: dict[str, str]) -> Response:
    return Response(
        msgspec.json.encode(problem),
        status_code=problem.status,
        media_type=PROBLEM_TYPE,
        headers=headers,
    )


def problem_event(exc: errors.TaskqError) -> bytes:
    """``exc`` as the last event of a stream whose 200 was sent before it was refused (a token
    revoked as it was followed): of type ``problem``, its data the problem document a
    response would carry."""
    problem = _problem(exc, status_of(exc) or 500, None)
    return f"event: {PROBLEM_EVENT}\ndata: {msgspec.json.encode(problem).decode()}\n\n".encode()


def _problem(exc: errors.TaskqError, status: int, retry_after: float | None) -> Problem:
    kind = type(exc)
    return Problem(
        type=f"{TYPE_PREFIX}{kind.__name__}",
        title=(kind.__doc__ or kind.__name__).strip().splitlines()[0],
        status=status,
        detail=str(exc),
        field=getattr(exc, "field", None),
        job_id=getattr(exc, "job_id", None),
        retry_after=retry_after,
    )


def problem_of(exc: Exception) -> Response | None:
    """The problem response for ``exc``, or None when it is not one this API answers with."""
    status = status_of(exc)
    if status is None or not isinstance(exc, errors.TaskqError):
        return None
    return problem_response(exc, status)


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``value`` (records included) as JSON, encoded by msgspec."""
    return Response(
        msgspec.json.encode(value),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


async def http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route 404, wrong method 405) as problem details."""
    assert isinstance(exc, HTTPException)
    problem = Problem(
        type="about:blank",
        title=HTTPStatus(exc.status_code).phrase,
        status=exc.status_code,
        detail=f"{request.method} {request.url.path}: {_way_out(exc)}",
    )
    return Response(
        msgspec.json.encode(problem),
        status_code=exc.status_code,
        media_type=PROBLEM_TYPE,
        headers=exc.headers,
    )


def _way_out(exc: HTTPException) -> str:
    """Starlette's refusal with what to do instead: the methods the path takes (its
    ``Allow``), or where the routes are listed; its bare phrase says neither."""
    allowed = (exc.headers or {}).get("Allow")
    if exc.status_code == 405 and allowed:
        return f"{exc.detail}; this path takes {allowed}"
    if exc.status_code == 404:
        return f"{exc.detail}: no such route (GET /openapi.json lists them)"
    return str(exc.detail)


async def server_error(request: Request, exc: Exception) -> Response:
    """A failure of the server's own (a bug) as a problem document too, not a bare text: a
    client reads every error one way. Uvicorn logs the traceback; the answer shows none."""
    problem = Problem(
        type="about:blank",
        title=HTTPStatus.INTERNAL_SERVER_ERROR.phrase,
        status=500,
        detail=f"{request.method} {request.url.path}: the server failed (a bug; its log has "
        "the traceback); read what the request was to change before sending it again, or "
        "resend it with the same Idempotency-Key",
    )
    return Response(msgspec.json.encode(problem), status_code=500, media_type=PROBLEM_TYPE)
