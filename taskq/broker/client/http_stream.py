"""Server-Sent Events (``text/event-stream``) out of the lines of a ``taskq serve`` answer.

:meth:`.http_transport.HttpTransport.stream` reads a streamed request's
answer with :class:`EventLines`; an answer that is JSON rather than a stream
it takes whole as one :class:`ServerEvent`.
"""

from __future__ import annotations

from typing import NamedTuple

EVENT_STREAM = "text/event-stream"
PROBLEM_EVENT = "problem"
"""The type of a stream's last event when the server refuses to go on (a token revoked as
the stream was followed): its data is the problem document (RFC 9457) a refusal carries."""


class ServerEvent(NamedTuple):
    """One event: its type (``""`` for a JSON answer taken whole) and its data."""

    kind: str
    data: bytes


class EventLines:
    """Server-Sent Events out of the stream's lines, fed one at a time (comments skipped)."""

    def __init__(self) -> None:
        self._kind = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerEvent | None:
        """The event ``line`` completes (an empty line ends one), else None."""
        if not line:
            if not self._data:
                return None
            event = ServerEvent(self._kind or "message", "\n".join(self._data).encode())
            self._kind, self._data = "", []
            return event
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._kind = value
        elif field == "data":
            self._data.append(value)
        return None  # an id (the resumed position is the Streamed's own), or a comment
