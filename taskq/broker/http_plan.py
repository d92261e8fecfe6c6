"""Plans of HTTP calls, written once and run by a blocking or an async driver.

A plan is a generator: it yields an :class:`HttpCall` (or a :class:`Pause`)
and is sent back what happened, an :class:`HttpReply` or a
:class:`SendFailure`. All decisions (which node, retry or not, what an
answer means) live in the plan; the two drivers below only move bytes and
sleep, so the blocking and async clients share every decision.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

import anyio
import httpx

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One request: to which node, what path and query, and which JSON body."""

    method: str
    base_url: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait before the next call (a backoff between failover attempts)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What a node answered: status, parsed JSON (or None) and the raw text."""

    status: int
    data: Any
    text: str
    headers: Mapping[str, str] = field(default_factory=dict)


class SendStage(enum.Enum):
    """How far a failed request got, which decides whether resending is safe."""

    NOT_SENT = "not_sent"  # nothing reached the node: always safe to resend
    SENT = "sent"  # the node may have acted on it: the outcome is unknown


@dataclass(frozen=True, slots=True)
class SendFailure:
    """A request that got no answer."""

    stage: SendStage
    message: str


Feedback: TypeAlias = HttpReply | SendFailure | None
Plan: TypeAlias = Generator[HttpCall | Pause, Feedback, T]


def classify_exception(exc: httpx.HTTPError) -> SendFailure:
    """Map an httpx transport error to how far the request got."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return SendFailure(SendStage.NOT_SENT, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return SendFailure(SendStage.NOT_SENT, f"{type(exc).__name__}: {exc}")
    return SendFailure(SendStage.SENT, f"{type(exc).__name__}: {exc}")


def reply_from_response(response: httpx.Response) -> HttpReply:
    text = response.text
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    return HttpReply(
        status=response.status_code, data=data, text=text, headers=dict(response.headers)
    )


def _build_request(client: httpx.Client | httpx.AsyncClient, call: HttpCall) -> httpx.Request:
    content = None if call.body is None else json.dumps(call.body)
    headers = {"Content-Type": "application/json"} if content is not None else None
    extensions = {}
    if call.timeout is not None:
        extensions["timeout"] = httpx.Timeout(call.timeout).as_dict()
    return client.build_request(
        call.method,
        call.base_url + call.path,
        params=dict(call.params),
        content=content,
        headers=headers,
        extensions=extensions,
    )


def run_plan(plan: Plan[T], client: httpx.Client) -> T:
    """Drive ``plan`` with a blocking client."""
    try:
        step = next(plan)
        while True:
            feedback: Feedback
            if isinstance(step, Pause):
                time.sleep(step.seconds)
                feedback = None
            else:
                try:
                    feedback = reply_from_response(client.send(_build_request(client, step)))
                except httpx.HTTPError as exc:
                    feedback = classify_exception(exc)
            step = plan.send(feedback)
    except StopIteration as done:
        result: T = done.value
        return result


async def run_plan_async(plan: Plan[T], client: httpx.AsyncClient) -> T:
    """Drive ``plan`` with an async client."""
    try:
        step = next(plan)
        while True:
            feedback: Feedback
            if isinstance(step, Pause):
                await anyio.sleep(step.seconds)
                feedback = None
            else:
                try:
                    response = await client.send(_build_request(client, step))
                    feedback = reply_from_response(response)
                except httpx.HTTPError as exc:
                    feedback = classify_exception(exc)
            step = plan.send(feedback)
    except StopIteration as done:
        result: T = done.value
        return result
