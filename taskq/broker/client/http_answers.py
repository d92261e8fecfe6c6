"""What an answer of ``taskq serve`` means: the response, the same request again later, or an error.

Written once, as plans, for both ways of running them (the trampoline's
:func:`~taskq.broker.stores.trampoline.drive` and ``drive_async``). A
response that is a problem (RFC 9457) is the taskq error it names
(:mod:`.problem_types`); a 503, or a server not reached, is asked again
after its ``Retry-After`` (a :class:`~taskq.broker.stores.trampoline.Pause`)
for as long as the call's time allows, since nothing was applied; then its
error is raised. A request sent that got no answer may have been applied:
:class:`taskq.errors.OutcomeUnknown`, unless it only reads. A server whose
TLS certificate this client does not trust did answer, as did one that
speaks the other protocol (TLS to an ``http://`` URL, plain HTTP to an
``https://`` one): each is :class:`taskq.errors.ConfigError` at once, saying
what to change, never asked again. So is an answer that is no taskq problem
(another server's page, a route taskq serve does not have), and a success
that is not taskq serve's (a page, JSON of another shape): its URL is told,
in one line, never its body. A route that a taskq serve lacks (an older one)
is told as such, with the version its OpenAPI document gives.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Generator, Sequence
from typing import NamedTuple, TypeAlias, TypeVar

import httpx
import msgspec

from taskq import errors
from taskq.broker.client.http_requests import (
    HttpPlan,
    HttpRequest,
    Streamed,
    UnlikeTaskq,
    json_of,
)
from taskq.broker.client.http_stream import EVENT_STREAM, PROBLEM_EVENT, ServerEvent
from taskq.broker.client.problem_types import PROBLEM_TYPE, TYPE_PREFIX, Problem, error_of
from taskq.broker.stores.store_url import mask_password
from taskq.broker.stores.trampoline import Pause

T = TypeVar("T")

# How long a server not reached is left before it is asked again (no Retry-After to go by).
UNREACHED_RETRY_SECONDS = 0.5
# How a Python caller sends the token a server wants (its own refusal tells of the header).
PASS_A_TOKEN = "pass it as token= (taskq.Client(url, token=...)) or set TASKQ_TOKEN"


class Unanswered(NamedTuple):
    """A request that got no response: what httpx raised, handed to the plan to judge.

    ``speaks_tls``: the server hung up on plain HTTP, then took a TLS handshake.
    """

    error: httpx.TransportError
    speaks_tls: bool = False


Sent: TypeAlias = httpx.Response | Unanswered
"""What carrying out a request gives back: never raised, so that the plan decides."""
RetryingPlan: TypeAlias = Generator[HttpRequest | Pause, Sent | None, T]
"""A plan the trampoline runs: requests to send, and pauses before asking again."""


class _Retry(NamedTuple):
    error: errors.TaskqError
    after: float


def asked_again(plan: HttpPlan[T], url: str, timeout: float) -> RetryingPlan[T]:
    """``plan``, each of its requests asked again while the server is unavailable.

    A request may take ``timeout`` seconds, and the seconds the server may hold
    it (its ``wait``), 503s ridden out included. An error (a refusal, or the
    last 503's) is thrown into ``plan`` at its ``yield``: a plan may take a
    refusal as an answer (a 409 for a job already ended). An answer ``plan``
    cannot read as taskq serve's is :func:`foreign_error`.
    """
    try:
        request = next(plan)
        while True:
            deadline = time.monotonic() + timeout + request.wait
            try:
                response = yield from answered(request, url, deadline)
            except errors.TaskqError as exc:
                request = plan.throw(exc)
                continue
            try:
                request = plan.send(response)
            except UnlikeTaskq as exc:
                raise foreign_error(response, url, unlike=str(exc)) from exc
    except StopIteration as done:
        result: T = done.value
        return result


def answered(
    request: HttpRequest,
    url: str,
    deadline: float,
    *,
    broken: httpx.TransportError | None = None,
    any_answer: bool = False,
) -> RetryingPlan[httpx.Response]:
    """The successful response to ``request``, asked again until ``deadline``; else raised.

    ``broken``: the request is asked again because its answer broke off (a
    stream), so it waits as for a server not reached first. ``any_answer``: a
    refusal other than a 503 is returned too, not raised (the question was
    only whether the server answers). A success of a type taskq serve never
    answers with (a page) is :func:`foreign_error`.
    """
    if broken is not None:
        yield Pause(_within(_unreached(request, url, Unanswered(broken)), deadline).after)
    while True:
        sent = yield request
        assert sent is not None, "a request is answered"
        if isinstance(sent, Unanswered):
            retry = _unreached(request, url, sent)
        elif sent.status_code == 503:
            retry = _Retry(problem_error(sent, url), _retry_after(sent))
        elif any_answer:
            return sent
        elif sent.is_success:
            if sent.status_code != 204 and _media_type(sent) not in _TASKQ_SUCCESS_TYPES:
                raise foreign_error(sent, url)
            return sent
        else:
            raise (yield from _refusal_error(sent, url))
        yield Pause(_within(retry, deadline).after)


# What taskq serve's successes carry (its 204s carry nothing).
_TASKQ_SUCCESS_TYPES = frozenset({"application/json", EVENT_STREAM})
# Asked of a server that lacks a route: whether it is taskq serve, and which version.
_DESCRIPTION = HttpRequest("GET", "/openapi.json")


class _Info(msgspec.Struct):
    title: str
    version: str


class _Description(msgspec.Struct):
    info: _Info


def _refusal_error(
    response: httpx.Response, url: str
) -> Generator[HttpRequest, Sent | None, errors.TaskqError]:
    """The error of a refusal (:func:`problem_error`; for a key that names a workflow, its
    first job read, :func:`_of_the_first_job`). For a route the server lacks, its
    OpenAPI document is asked for: a taskq serve's names its version, and the route is
    then one that version does not offer (an older taskq serve's), not a wrong URL."""
    if not _lacks_the_route(response):
        error = problem_error(response, url)
        if isinstance(error, errors.IdempotencyConflict):
            return (yield from _of_the_first_job(error, response))
        return error
    described = yield _DESCRIPTION
    version = _taskq_version(described)
    if version is None:
        return foreign_error(response, url)
    asked = f"{response.request.method} {response.request.url.path}"
    return errors.ConfigError(
        f"taskq serve at {mask_password(url)} (version {version}) does not offer {asked}, "
        f"which this client (taskq {_own_version()}) asks for: the server is probably older; "
        "upgrade it"
    )


def _own_version() -> str:
    """This taskq's version, as installed: read here, not from the package's root, which
    stands above the broker."""
    from importlib import metadata  # only a refusal needs it

    try:
        return metadata.version("taskq")
    except metadata.PackageNotFoundError:
        return "unknown"  # run from a source tree that was never installed


class _NamedWorkflow(msgspec.Struct):
    """The member of a problem that names the workflow an idempotency key already names
    (``taskq.server.problems.Problem``)."""

    workflow_id: int | None = None


class _FirstJob(msgspec.Struct):
    id: int


class _WorkflowJobs(msgspec.Struct):
    """The jobs of GET /workflows/{id}, oldest first."""

    jobs: list[_FirstJob]


def _of_the_first_job(
    conflict: errors.IdempotencyConflict, response: httpx.Response
) -> Generator[HttpRequest, Sent | None, errors.IdempotencyConflict]:
    """``conflict`` as a client on the store raises it. The server names a workflow the
    key already names by its id, where the store's error names its first job (``job_id``):
    that job is read; ``conflict`` is left as it came when it cannot be."""
    try:
        named = msgspec.json.decode(response.content, type=_NamedWorkflow).workflow_id
    except msgspec.DecodeError:
        named = None
    if named is None:
        return conflict
    view = _success_as((yield HttpRequest("GET", f"/workflows/{named}")), _WorkflowJobs)
    if view is None or not view.jobs:
        return conflict
    return errors.IdempotencyConflict(str(conflict), job_id=view.jobs[0].id)


def _lacks_the_route(response: httpx.Response) -> bool:
    """Whether ``response`` is a problem document refusing the path or the method, as taskq
    serve answers a request for a route it does not have (Starlette's 404 and 405)."""
    return (
        response.status_code in _NO_ROUTE
        and _media_type(response) == PROBLEM_TYPE
        and _taskq_problem(response) is None
    )


def _taskq_version(described: Sent | None) -> str | None:
    """The version an OpenAPI document names, if it is taskq serve's; else None."""
    document = _success_as(described, _Description)
    if document is None or document.info.title != "taskq":
        return None
    return document.info.version


def _success_as(answer: Sent | None, into: type[T]) -> T | None:
    """A successful answer's JSON as ``into``; None for any other answer, or JSON of
    another shape."""
    if not isinstance(answer, httpx.Response) or not answer.is_success:
        return None
    try:
        return msgspec.json.decode(answer.content, type=into)
    except msgspec.DecodeError:
        return None


def event_answers(
    streamed: Streamed[T], event: ServerEvent, response: httpx.Response, url: str
) -> Sequence[T]:
    """The answers ``event`` of ``response`` carries. A ``problem`` event (the server's
    refusal to go on with a stream it began: the token revoked) is the error it names; an
    event taskq serve would not send is :func:`foreign_error`."""
    try:
        if event.kind == PROBLEM_EVENT:
            raise error_of(json_of(event.data, Problem))
        return streamed.answers(event)
    except UnlikeTaskq as exc:
        raise foreign_error(response, url, unlike=str(exc)) from exc


def _unreached(request: HttpRequest, url: str, unanswered: Unanswered) -> _Retry:
    """A request that got no answer: safe to send again unless it may have been applied."""
    shown = mask_password(url)  # as a store URL's is, in every message
    where = f"taskq serve at {shown}"
    exc = unanswered.error
    refused = _refused_certificate(exc)
    if refused is not None:
        raise errors.ConfigError(f"{where}: {_certificate_advice(refused)}") from exc
    # Either way nothing was applied, and asking again would only meet the same mistake.
    if unanswered.speaks_tls:
        raise errors.ConfigError(
            f"{where}: the server speaks HTTPS (it hung up on plain HTTP and took a TLS "
            f"handshake); use https://{shown.removeprefix('http://')}"
        ) from exc
    if url.startswith("https://") and _answered_in_plain_text(exc):
        raise errors.ConfigError(
            f"{where}: the server speaks plain HTTP, not HTTPS (it answered the TLS handshake "
            f"in plain text); use http://{shown.removeprefix('https://')}"
        ) from exc
    if isinstance(exc, httpx.LocalProtocolError):
        # This client could not write the request (a header h11 refuses): the server got no
        # request to apply, and the same one sent again would be refused the same way.
        raise errors.ConfigError(
            f"{request.method} {request.path}: not sent to {where} ({exc}); nothing was applied"
        ) from exc
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) or request.method == "GET":
        error = errors.StoreUnavailable(f"{where} did not answer: {exc!r}")
        return _Retry(error, UNREACHED_RETRY_SECONDS)
    raise errors.OutcomeUnknown(
        f"{request.method} {request.path}: {where} did not answer ({exc!r}); "
        "it may or may not have been applied"
    ) from exc


# OpenSSL's verify codes for a certificate signed by no CA this client trusts: issuer not
# found (2, 20), self-signed (18, 19), leaf's signature not verifiable (21).
_UNTRUSTED_CODES = frozenset({2, 18, 19, 20, 21})
# For a certificate that names another host (62) or another IP address (64).
_MISMATCH_CODES = frozenset({62, 64})


# What OpenSSL says of a TLS handshake answered by bytes that are no TLS record ("HTTP/1.1 400"):
# 3.0 reads them as a wrong version, 3.2 on as a failure of the record layer.
_PLAIN_TEXT_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE"})


def _refused_certificate(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The server's certificate refused by this client, beneath what httpx raised, if it was."""
    return _ssl_cause(exc, ssl.SSLCertVerificationError)


def _answered_in_plain_text(exc: BaseException) -> bool:
    """Whether the server answered this client's TLS handshake with something not TLS."""
    failed = _ssl_cause(exc, ssl.SSLError)
    return failed is not None and failed.reason in _PLAIN_TEXT_REASONS


_SslErrorT = TypeVar("_SslErrorT", bound=ssl.SSLError)


def _ssl_cause(exc: BaseException, kind: type[_SslErrorT]) -> _SslErrorT | None:
    """The TLS error of ``kind`` beneath what httpx raised, if there is one."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _certificate_advice(refused: ssl.SSLCertVerificationError) -> str:
    """Why the server's certificate was refused, and what to do about it."""
    reason = refused.verify_message or refused.reason or str(refused)
    if refused.verify_code in _UNTRUSTED_CODES:
        return (
            f"its TLS certificate is not trusted ({reason}); pass the certificate that signed "
            "it (your CA's, or a self-signed server's own) as "
            'taskq.Client(url, ca="path/to/cert.pem")'
        )
    if refused.verify_code in _MISMATCH_CODES:
        return f"its TLS certificate is for another address ({reason}); use a name it holds"
    return f"its TLS certificate was refused ({reason})"


def _within(retry: _Retry, deadline: float) -> _Retry:
    """``retry``, if its wait ends before ``deadline``; else its error, raised."""
    if time.monotonic() + retry.after > deadline:
        raise retry.error
    return retry


def problem_error(response: httpx.Response, url: str) -> errors.TaskqError:
    """The error a refusal's problem document names; the refusal of a request that carried
    no token says how a Python client sends one. An answer that is no taskq problem is
    :func:`foreign_error`."""
    problem = _taskq_problem(response)
    if problem is None:
        return foreign_error(response, url)
    error = error_of(problem)
    # The server's words say how to send the header; this client was given no token.
    if isinstance(error, errors.Unauthorized) and "authorization" not in response.request.headers:
        return errors.Unauthorized.tokenless(PASS_A_TOKEN)
    return error


def _taskq_problem(response: httpx.Response) -> Problem | None:
    """The problem ``response`` carries if taskq serve wrote it, else None: one of taskq's
    types, or ``about:blank`` sent as a problem document, but for a missing route."""
    try:
        problem = msgspec.json.decode(response.content, type=Problem)
    except msgspec.MsgspecError:
        return None
    if problem.type.startswith(TYPE_PREFIX):
        return problem
    # about:blank is taskq serve's for a route it lacks (404, 405): a URL with a wrong path
    # (or an older server), told as a URL to check, not as a request taskq refused.
    if _media_type(response) != PROBLEM_TYPE or response.status_code in _NO_ROUTE:
        return None
    return problem


# What a server answers a request for a path (404) or a method (405, 501) it does not serve.
_NO_ROUTE = frozenset({404, 405, 501})
# Bounds the reason phrase quoted: a server's own words, on one line of an error.
_REASON_CHARS = 80


def foreign_error(response: httpx.Response, url: str, *, unlike: str = "") -> errors.TaskqError:
    """The error of an answer that is no taskq problem (another server's page, a proxy's,
    a route taskq serve does not have) or no taskq answer (a success of another server),
    in one line: what was asked, the status and the answer's type, never its body (a page
    of HTML, as often as not); ``unlike``: how a body differs from taskq serve's. A 2xx or
    a refusal (4xx, 501) says the URL names no taskq serve (:class:`taskq.errors.ConfigError`:
    asked again it would be answered the same); any other 5xx is a server, or a proxy before
    it, that failed (:class:`taskq.errors.StoreError`; a 503,
    :class:`taskq.errors.StoreUnavailable`)."""
    status = response.status_code
    media = _media_type(response) or "no Content-Type"
    if media == PROBLEM_TYPE and status in _NO_ROUTE:
        media = "no such route"
    if unlike:
        media += f", not as taskq serve's: {' '.join(unlike.split())[:_REASON_CHARS]}"
    reason = " ".join(response.reason_phrase.split())[:_REASON_CHARS]
    status_line = f"{status} {reason}" if reason else str(status)
    asked = f"{response.request.method} {response.request.url.path}"
    answer = f"{asked} answered {status_line} ({media})"
    shown = mask_password(url)
    if status < 500 or status == 501:
        return errors.ConfigError(f"no taskq serve at {shown}: {answer}; check the URL")
    said = (
        f"{answer} at {shown}, not as taskq serve answers: the server failed, or a proxy before it"
    )
    return (errors.StoreUnavailable if status == 503 else errors.StoreError)(said)


def _media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower()


def _retry_after(response: httpx.Response) -> float:
    text = response.headers.get("retry-after", "")
    try:
        return max(float(text), 0.0)
    except ValueError:
        return 1.0
