"""What the HTTP client's plans are made of: the requests they yield, and a stream's shape.

A request of the HTTP client is a plan as a store's is (:mod:`.http_plans`):
a generator that yields each :class:`HttpRequest` it needs and is sent the
answer (an ``httpx.Response``), or has the error a refusal names thrown in.
:class:`.http_transport.HttpTransport` runs it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeVar

import msgspec

from taskq.broker.client.http_stream import ServerEvent

if TYPE_CHECKING:
    # Only the HTTP client's transport needs httpx at run time: importing it
    # (and, through its own command line, click, rich and pygments) costs
    # every taskq command about 0.2 s, embedded store or not.
    import httpx

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

TOKEN_ENV = "TASKQ_TOKEN"
"""Where a client finds its token when it is given none."""

LONG_POLL_SECONDS = 60.0
"""The longest the server holds a request open (a job waited for): under proxies' idle timeouts."""


class HttpRequest(NamedTuple):
    """One request of a plan: ``body`` is JSON already encoded; ``wait`` the seconds the
    server may hold it (a long poll) or stay quiet (a stream), which its read timeout allows for."""

    method: str
    path: str
    params: Mapping[str, str | int | float] | None = None
    body: bytes | None = None
    wait: float = 0.0
    headers: Mapping[str, str] | None = None


HttpPlan: TypeAlias = Generator[HttpRequest, "httpx.Response", T]


class Streamed(Protocol[T_co]):
    """A request whose answers come as events (:mod:`.http_stream`), resumed where it was
    when its stream breaks: run by :meth:`.http_transport.HttpTransport.stream`."""

    def next_request(self) -> HttpRequest | None:
        """The request that opens the stream from where it is now; None once it is over."""
        ...

    def answers(self, event: ServerEvent) -> Sequence[T_co]:
        """The answers ``event`` carries (it moves the position the next request resumes at)."""
        ...


class UnlikeTaskq(Exception):
    """A successful answer whose body is not what taskq serve sends for the request (its
    words say how): the transport tells it as another server's answer
    (:func:`.http_answers.foreign_error`), with the URL it was asked at."""


def json_of(data: bytes, into: Any) -> Any:
    """``data``, an answer's JSON, as ``into`` (a type of taskq's records, a union of them),
    or :class:`UnlikeTaskq`."""
    try:
        return msgspec.json.decode(data, type=into)
    except msgspec.DecodeError as exc:  # a ValidationError too: JSON of another shape
        raise UnlikeTaskq(str(exc)) from exc


def decoded(response: httpx.Response, into: type[T]) -> T:
    """The answer's JSON as ``into`` (a record of taskq's), or :class:`UnlikeTaskq`."""
    record: T = json_of(response.content, into)
    return record


def decoded_member(response: httpx.Response, member: str, into: Any) -> Any:
    """One member of the answer's JSON object (``{"jobs": [...]}``), as ``into``, or
    :class:`UnlikeTaskq`."""
    answer = decoded(response, dict[str, Any])
    if member not in answer:
        raise UnlikeTaskq(f"Object missing member `{member}`")
    try:
        return msgspec.convert(answer[member], into)
    except msgspec.ValidationError as exc:
        raise UnlikeTaskq(f"{exc} (member `{member}`)") from exc
