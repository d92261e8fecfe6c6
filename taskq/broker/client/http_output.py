"""A job's output over ``taskq serve``: ``GET /jobs/{id}/output``, stored or followed.

Not following, one answer holds what the attempt stored now. Following, the
server streams the pieces as Server-Sent Events until the job ends; when the
connection breaks, the stream is opened again from the last piece kept (its
id, :func:`event_id`, sent back as ``Last-Event-ID``), so the caller sees each
piece once, as the store client's :class:`taskq.broker.ops.output.OutputReader`
hands them.
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


def event_id(attempt: int, run: int, end: int) -> str:
    """The id of a followed event: where its piece leaves the output, byte ``end`` of run
    ``run`` of ``attempt``, which ``Last-Event-ID`` sends back to resume there.

    ``ATTEMPT:END`` for an attempt's first run, ``ATTEMPT.RUN:END`` for a later one: a
    worker's hand-back runs the attempt again under its number, and a resume must go on
    with the very run it was reading, not the one after it."""
    return f"{attempt}:{end}" if run == 1 else f"{attempt}.{run}:{end}"


class _Page(msgspec.Struct, frozen=True):
    events: list[OutputEvent]


class OutputOverHttp:
    """The output of ``job_id`` from ``attempt`` (None: the latest), its run ``run`` (None:
    its latest) and byte ``start`` on, as :meth:`taskq.Client.output` takes them;
    ``poll_seconds`` is the server's to choose."""

    def __init__(
        self,
        job_id: specs.JobRef,
        *,
        attempt: int | None = None,
        run: int | None = None,
        start: int = 0,
        follow: bool = False,
        poll_seconds: float = 0.25,
    ) -> None:
        self.job_id = specs.job_id(job_id, "output")
        # The store reader's checks of the position: the same refusals, at the call.
        OutputReader(
            self.job_id,
            attempt=attempt,
            run=run,
            start=start,
            follow=follow,
            poll_seconds=poll_seconds,
        )
        self.done = False
        self._attempt = attempt
        self._run = run
        self._position = start
        self._follow = follow
        # The last end handed on: a stream resumed at a run's end says it again.
        self._last_end: AttemptEnded | None = None

    def next_request(self) -> HttpRequest | None:
        """GET of the output from where the reader is; None once it is done."""
        if self.done:
            return None
        path = f"/jobs/{self.job_id}/output"
        params: dict[str, str | int | float] = {"follow": "true"} if self._follow else {}
        wait = _QUIET_SECONDS if self._follow else 0.0
        if self._attempt is not None and self._run is not None:
            # The very run read last, named as the server's events name it.
            resume = {"Last-Event-ID": event_id(self._attempt, self._run, self._position)}
            return HttpRequest("GET", path, params, wait=wait, headers=resume)
        # No run known yet: ?attempt= is that attempt's latest run, as the store reader's.
        params["offset"] = self._position
        if self._attempt is not None:
            params["attempt"] = self._attempt
        return HttpRequest("GET", path, params, wait=wait)

    def answers(self, event: ServerEvent) -> list[OutputEvent]:
        """The pieces of a stored page (a JSON answer) or of one followed event."""
        if not event.kind:
            self.done = True
            return [self._kept(piece) for piece in json_of(event.data, _Page).events]
        piece: OutputEvent = json_of(event.data, OutputEvent)
        if isinstance(piece, AttemptEnded) and piece == self._last_end:
            return []  # resumed at the end of a run already said to be over
        return [self._kept(piece)]

    def _kept(self, piece: OutputEvent) -> OutputEvent:
        """``piece``, the position moved past it."""
        if isinstance(piece, AttemptEnded):
            if piece.job_state.finished:
                self.done = True
            ended = (piece.attempt, piece.run)
            if piece.attempt is not None and ended != (self._attempt, self._run):
                # A run ended of which no piece came: the one asked for, nothing in it past
                # ``start``; or one after the run read last, which printed nothing.
                if self._run is not None:
                    self._position = 0
                self._attempt, self._run = ended
            self._last_end = piece
        else:
            self._attempt, self._run, self._position = piece.attempt, piece.run, piece.end
        return piece
