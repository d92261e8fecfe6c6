"""Live output: what running attempts write, stored under their leases and read back as it comes.

A worker cuts what its jobs write to stdout and stderr into chunks and
sends those of every job it holds in one write (:func:`output_append`), a
few times a second while they print and never while they are quiet; the
last of an attempt's go with its report, in the same batch
(:func:`output_statements`). Every chunk is fenced by its job's lease, so a
worker whose lease moved on writes nothing, and each attempt keeps at most
its last ``keep_bytes``: older chunks go, and the gap they leave says how
much was dropped. An attempt whose whole output is small and comes with its
report, none of it sent before (most short jobs'), is stored in its
execution row instead (``executions.output_inline``, :func:`inline_text`),
which the report updates anyway: no row of ``job_output``, no statement more.
Either way an attempt's bytes have one record, and readers see the same.

A reader (:class:`OutputReader`) reads an attempt's chunks from a byte
position on, page by page; following, it waits for more until the job ends,
going on to each new attempt as it starts. An attempt a worker handed back
(a release) is run again under the same number: each of its runs has its
own output, and the reader's pieces say which run (``run``) they are of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from taskq import errors, fast_json
from taskq.broker.ops import queries
from taskq.broker.ops.common import from_json
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import (
    FINISHED_STATES,
    AttemptEnded,
    JobState,
    Lease,
    OutputDropped,
    OutputEvent,
    OutputText,
)
from taskq.broker.stores.store import Row, SqlValue, Statement
from taskq.broker.stores.trampoline import Pause

MOST_CHUNK_BYTES = 64 * 1024
"""The longest chunk a worker sends: readers find the chunk holding a byte by it."""

INLINE_MOST_BYTES = 4 * 1024
"""The most output an attempt may have for its report to store it in the attempt's row."""

ATTEMPT_TAIL_BYTES = 64 * 1024
"""How much of the end of an attempt's output comes with its record (``Execution.log_tail``)."""

# Chunks read at once: a page of output is at most this many chunks long.
_PAGE_CHUNKS = 64
# A follower polls fast at first (output often comes soon after a start), then settles.
_FIRST_POLL_SECONDS = 0.05


class OutputChunk(msgspec.Struct, frozen=True, array_like=True):
    """Bytes ``start`` to ``start + size`` of what an attempt wrote, as text."""

    start: int
    size: int
    text: str

    @property
    def end(self) -> int:
        return self.start + self.size


class AttemptOutput(msgspec.Struct, frozen=True):
    """Chunks of one running attempt to store, in order, and how much of its output to keep."""

    lease: Lease
    chunks: tuple[OutputChunk, ...]
    keep_bytes: int
    first_write: bool = False
    """No write before this one carried any of the attempt's output (False: not known)."""

    def end(self) -> int | None:
        """Where the attempt's output ends with these chunks (None: there are none)."""
        return self.chunks[-1].end if self.chunks else None


# -- writing --------------------------------------------------------------------------


def inline_text(output: AttemptOutput | None) -> str | None:
    """The whole output of an ended attempt, for its report to store in the attempt's row;
    None when it goes as chunks (see :func:`output_statements`).

    Inline only when these chunks are all the store will have of it: one,
    from byte 0, of at most :data:`INLINE_MOST_BYTES` (and within what is
    kept), in the first write to carry any of it, so no chunk of the attempt
    is stored, not even one whose write's answer was lost.
    """
    if output is None or not output.first_write or len(output.chunks) != 1:
        return None
    [chunk] = output.chunks
    if chunk.start != 0 or chunk.size > min(INLINE_MOST_BYTES, output.keep_bytes):
        return None
    return chunk.text


def output_statements(
    outputs: Sequence[AttemptOutput], *, reported: bool = False
) -> list[Statement]:
    """The statements storing ``outputs``, each attempt's fenced by its lease; none if empty.

    One statement of each kind for the whole batch, whatever the number of
    attempts. A report's batch carries them ahead of the reports
    (``reported``), whose statements end the job's ``running`` state that
    fences them and record where each attempt's output ends
    (:meth:`AttemptOutput.end`): then a job that prints costs the report
    the rows of its chunks and nothing more, and one whose output goes
    inline (:func:`inline_text`) costs it no statement here at all.
    """
    if reported:
        outputs = [output for output in outputs if inline_text(output) is None]
    chunks = [
        {"token": output.lease.token, "at": chunk.start, "size": chunk.size, "data": chunk.text}
        for output in outputs
        for chunk in output.chunks
    ]
    if not chunks:
        return []
    ends: list[dict[str, Any]] = [
        {"token": output.lease.token, "end": output.end(), "keep": output.keep_bytes}
        for output in outputs
        if output.chunks
    ]
    statements = [
        Statement(queries.query("output_append"), {"chunks": fast_json.dumps_text(chunks)})
    ]
    if not reported:
        account = {"attempts": fast_json.dumps_text(ends)}
        statements.append(Statement(queries.query("output_account"), account))
    # An attempt's writes end further on each time: one that ends within what
    # is kept has nothing to trim, as is so of nearly every job's output.
    overflowing = [attempt for attempt in ends if attempt["end"] > attempt["keep"]]
    if overflowing:
        trim = {"attempts": fast_json.dumps_text(overflowing)}
        statements.append(Statement(queries.query("output_trim"), trim))
    return statements


def output_append(outputs: Sequence[AttemptOutput]) -> Op[None]:
    """Store the chunks of running attempts in one write; a chunk stored already is kept as it is.

    Sent again after an unknown outcome, the write changes nothing more.
    """
    statements = output_statements(outputs)
    if statements:
        yield Write(statements, idempotent=True)


# -- reading --------------------------------------------------------------------------


class OutputReader:
    """Reads one job's output page by page, from a byte position of an attempt on.

    It starts at attempt number ``attempt`` (None: the latest), run ``run``
    of it (None: its latest), at byte ``start``. Not following, it reads
    what that run has stored now and is ``done``; following, a page waits
    (polling every ``poll_seconds`` at most) until there is something to
    hand, each run after that one is read in turn as it starts, and the
    reader is ``done`` after the :class:`AttemptEnded` of a finished job. So
    a follower that stopped resumes where it was with the attempt, the run
    and the ``end`` of the last piece it kept.
    """

    def __init__(
        self,
        job_id: int,
        *,
        attempt: int | None = None,
        run: int | None = None,
        start: int = 0,
        follow: bool = False,
        poll_seconds: float = 0.25,
    ) -> None:
        if attempt is not None and attempt < 1:
            raise ValueError(f"attempts are numbered from 1, not {attempt}")
        if run is not None and attempt is None:
            raise ValueError("a run is counted within its attempt: give the attempt too")
        if run is not None and run < 1:
            raise ValueError(f"an attempt's runs are numbered from 1, not {run}")
        if start < 0:
            raise ValueError(f"an output position is a byte count from 0, not {start}")
        if not poll_seconds > 0:
            raise ValueError(f"poll_seconds must be positive, not {poll_seconds}")
        self.job_id = job_id
        self.done = False
        self._attempt = attempt
        self._run = run
        self._position = start
        self._follow = follow
        self._poll_seconds = poll_seconds
        self._execution_id: int | None = None  # the attempt being read, once found
        self._after_id: int | None = None  # the attempt read to its end, when there may be more

    def next_page(self) -> Op[list[OutputEvent]] | None:
        """The plan of the next page of output; None once the reader is done."""
        return None if self.done else self._page()

    def _page(self) -> Op[list[OutputEvent]]:
        delay = min(_FIRST_POLL_SECONDS, self._poll_seconds)
        while True:
            events, caught_up = yield from self._read()
            if caught_up and not self._follow:
                self.done = True
            if events or self.done:
                return events
            yield Pause(delay)
            delay = min(delay * 2, self._poll_seconds)

    def _read(self) -> Op[tuple[list[OutputEvent], bool]]:
        """What is stored past the position now, and whether that was all of it."""
        row = yield from self._attempt_row()
        state = JobState(row["job_state"])
        if row["id"] is None:
            return self._no_attempt(state, from_json(row["job_error"])), True
        self._execution_id = execution_id = int(row["id"])
        attempt, run = int(row["attempt"]), int(row["run"])
        # The attempt's state is read before its chunks: an attempt that had
        # ended then had all its output stored, for its last chunks go with its end.
        if row["output_inline"] is not None:
            chunks = self._inline_chunks(row)
        else:
            chunks = yield Read(
                Statement(
                    queries.query("output_chunks"),
                    {
                        "execution_id": execution_id,
                        "after": self._position,
                        "most_chunk_bytes": MOST_CHUNK_BYTES,
                        "limit": _PAGE_CHUNKS,
                    },
                )
            )
        events = [event for chunk in chunks for event in self._events_of(attempt, run, chunk)]
        caught_up = len(chunks) < _PAGE_CHUNKS
        if caught_up and row["finished_at"] is not None:
            events += self._ended(attempt, run, row, state)
        return events, caught_up

    def _attempt_row(self) -> Op[Row]:
        params: dict[str, SqlValue]
        if self._execution_id is not None:
            name, params = "output_attempt_same", {"execution_id": self._execution_id}
        elif self._after_id is not None:
            name, params = "output_attempt_after", {"after_id": self._after_id}
        elif self._run is not None:
            name, params = "output_attempt_run", {"attempt": self._attempt, "run": self._run}
        else:
            name, params = "output_attempt_numbered", {"attempt": self._attempt}
        sql = queries.query("output_attempt").format(attempt_id=queries.query(name))
        rows = yield Read(Statement(sql, {"job_id": self.job_id, **params}))
        if not rows:
            raise errors.JobNotFound(f"no job with id {self.job_id}")
        row: Row = rows[0]
        return row

    def _no_attempt(self, state: JobState, error: dict[str, Any] | None) -> list[OutputEvent]:
        """No attempt to read (yet): wait for one, or say the job ended without one."""
        asked = self._asked()
        if state in FINISHED_STATES:
            if self._attempt is not None:
                raise errors.AttemptNotFound(f"job {self.job_id} is {state} and has no {asked}")
            self.done = True
            return [AttemptEnded(None, None, error, state)]
        if self._attempt is not None and not self._follow:
            raise errors.AttemptNotFound(f"job {self.job_id} has no {asked} yet")
        return []

    def _asked(self) -> str:
        """The attempt asked for, in words; a run of it past its first named too."""
        if self._run is None or self._run == 1:
            return f"attempt {self._attempt}"
        return f"run {self._run} of attempt {self._attempt}"

    def _inline_chunks(self, row: Row) -> list[Row]:
        """An attempt's output stored in its row (:func:`inline_text`), read as the one chunk
        it was sent as: bytes 0 to its end, if the position is before that end."""
        end = int(row["output_bytes"])
        return (
            [{"at_byte": 0, "size": end, "data": row["output_inline"]}]
            if end > self._position
            else []
        )

    def _events_of(self, attempt: int, run: int, row: Row) -> list[OutputEvent]:
        """A stored chunk as the reader hands it on, after the gap before it if any."""
        start, text = int(row["at_byte"]), str(row["data"])
        end = start + int(row["size"])
        events: list[OutputEvent] = []
        if start > self._position:
            events.append(OutputDropped(attempt, self._position, start, run))
        elif start < self._position:
            # A position inside the chunk: one a reader resumes from, say.
            text = text.encode()[self._position - start :].decode(errors="replace")
            start = self._position
        self._position = end
        if text:
            events.append(OutputText(attempt, start, end, text, run))
        return events

    def _ended(self, attempt: int, run: int, row: Row, state: JobState) -> list[OutputEvent]:
        """The attempt ended and all of its output was read: say so; then on to the next."""
        events: list[OutputEvent] = []
        end = int(row["output_bytes"])
        if end > self._position:
            events.append(OutputDropped(attempt, self._position, end, run))
        if self._follow and state in FINISHED_STATES and row["later_attempts"]:
            # An earlier attempt of a job that has ended since, followed from it: the job
            # was queued again after it, and the follow goes on to the next, as it would
            # have while the job ran.
            state = JobState.QUEUED
        error = from_json(row["error"])
        events.append(AttemptEnded(attempt, row["outcome"], error, state, run))
        if state in FINISHED_STATES:
            self.done = True
        else:
            self._after_id, self._execution_id, self._position = self._execution_id, None, 0
        return events
