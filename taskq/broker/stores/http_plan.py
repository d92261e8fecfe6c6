"""Plans of HTTP calls, written once and run blocking or async by the one trampoline.

An HTTP plan is a generator: it yields an :class:`HttpCall` (or a
:class:`~taskq.broker.stores.trampoline.Pause`) and is sent back what happened, an
:class:`HttpReply` or a :class:`SendFailure`. All decisions (which node,
retry or not, what an answer means) live in the plan; running it
(:func:`run_http_plan`, :func:`run_http_plan_async`) only moves bytes and
sleeps, so the blocking and async clients share every decision.
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from taskq.broker.stores.trampoline import Pause, drive, drive_async

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
    """A request that got no answer.

    ``refused``: the node's host refused the connection (nothing listens at
    its address), so the node is down rather than slow or electing.
    """

    stage: SendStage
    message: str
    refused: bool = False


Feedback: TypeAlias = HttpReply | SendFailure | None
HttpPlan: TypeAlias = Generator[HttpCall | Pause, Feedback, T]


class Transport(Protocol):
    """What moves a plan's calls: each call comes back answered or failed, never raised."""

    def send(self, call: HttpCall) -> HttpReply | SendFailure: ...

    async def send_async(self, call: HttpCall) -> HttpReply | SendFailure: ...

    def close(self) -> None:
        """Close what blocking sends opened."""

    async def aclose(self) -> None:
        """Close everything."""


def run_http_plan(plan: HttpPlan[T], transport: Transport) -> T:
    """Run ``plan``, blocking."""
    return drive(plan, transport.send)


async def run_http_plan_async(plan: HttpPlan[T], transport: Transport) -> T:
    """Run ``plan`` in an anyio task."""
    return await drive_async(plan, transport.send_async)
