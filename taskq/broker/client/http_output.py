"""A job's output over ``taskq serve``: ``GET /jobs/{id}/output``, stored or followed.

Not following, one answer holds what the attempt stored now. Following, the
server streams the pieces as Server-Sent Events until the job ends; when the
connection breaks, the stream is opened again from the last piece kept
(``Last-Event-ID: ATTEMPT:END``), so the caller sees each piece once, as the
store client's :class:`taskq.broker.ops.output.OutputReader` hands them.
"""

from __future__ import annotations

import msgspec

from taskq.broker.client import specs
from taskq.broker.client.http_requests import HttpRequest, json_of
from taskq.broker.client.http_stream import ServerEvent
from taskq.broker.ops.output import OutputReader
from taskq.broker.records import AttemptEnded, OutputEvent

# The server breaks a quiet stream with a comment every 15 s: a read waits longer than that.
_QUIET_SECONDS = 20.0


class _Page(msgspec.Struct, frozen=True):
    events: list[OutputEvent]


class OutputOverHttp:
    """The output of ``job_id`` from ``attempt`` (None: the latest) and byte ``start`` on,
    as :meth:`taskq.Client.output` takes them; ``poll_seconds`` is the server's to choose."""

    def __init__(
        self,
        job_id: specs.JobRef,
        *,
        attempt: int | None = None,
        start: int = 0,
        follow: bool = False,
        poll_seconds: float = 0.25,
    ) -> None:
        self.job_id = specs.job_id(job_id, "output")
        # The store reader's checks of the position: the same refusals, at the call.
        OutputReader(
            self.job_id, attempt=attempt, start=start, follow=follow, poll_seconds=poll_seconds
        )
        self.done = False
        self._attempt = attempt
        self._position = start
        self._follow = follow
        # The last end handed on: a stream resumed at an attempt's end says it again. Not
        # its number alone: a run handed back by a draining worker and the run after it
        # share their attempt's number, and each has its own end.
        self._last_end: AttemptEnded | None = None

    def next_request(self) -> HttpRequest | None:
        """GET of the output from where the reader is; None once it is done."""
        if self.done:
            return None
        path = f"/jobs/{self.job_id}/output"
        if not self._follow:
            params: dict[str, str | int | float] = {"offset": self._position}
            if self._attempt is not None:
                params["attempt"] = self._attempt
            return HttpRequest("GET", path, params)
        if self._attempt is None:
            return HttpRequest(
                "GET", path, {"follow": "true", "offset": self._position}, wait=_QUIET_SECONDS
            )
        resume = {"Last-Event-ID": f"{self._attempt}:{self._position}"}
        return HttpRequest("GET", path, {"follow": "true"}, wait=_QUIET_SECONDS, headers=resume)

    def answers(self, event: ServerEvent) -> list[OutputEvent]:
        """The pieces of a stored page (a JSON answer) or of one followed event."""
        if not event.kind:
            self.done = True
            return [self._kept(piece) for piece in json_of(event.data, _Page).events]
        piece: OutputEvent = json_of(event.data, OutputEvent)
        if isinstance(piece, AttemptEnded) and piece == self._last_end:
            return []  # resumed at the end of an attempt already said to be over
        return [self._kept(piece)]

    def _kept(self, piece: OutputEvent) -> OutputEvent:
        """``piece``, the position moved past it."""
        if isinstance(piece, AttemptEnded):
            if piece.job_state.finished:
                self.done = True
            if piece.attempt is not None and piece.attempt != self._attempt:
                self._attempt, self._position = piece.attempt, 0  # an attempt that printed nothing
            self._last_end = piece
        else:
            self._attempt, self._position = piece.attempt, piece.end
        return piece
