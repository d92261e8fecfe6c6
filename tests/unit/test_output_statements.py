"""Statements storing live output: one of each kind per batch, no trim when none is due, and
none for an attempt whose whole small output goes inline with its report."""

from __future__ import annotations

import json

import msgspec

from taskq.broker.ops import queries
from taskq.broker.ops.output import (
    INLINE_MOST_BYTES,
    AttemptOutput,
    OutputChunk,
    inline_text,
    output_statements,
)
from taskq.broker.records import Lease

KEEP = 1000


def _output(job_id: int, start: int, text: str, *, first_write: bool = False) -> AttemptOutput:
    chunk = OutputChunk(start, len(text.encode()), text)
    return AttemptOutput(Lease(job_id, f"token-{job_id}"), (chunk,), KEEP, first_write)


def test_a_batch_of_many_attempts_is_one_statement_of_each_kind() -> None:
    outputs = [_output(n, 0, f"job {n} says hello\n") for n in range(50)]
    statements = output_statements(outputs)
    assert [statement.sql for statement in statements] == [
        queries.query("output_append"),
        queries.query("output_account"),
    ]
    [chunks] = [json.loads(str(value)) for value in statements[0].params.values()]
    assert len(chunks) == 50


def test_a_reports_batch_stores_the_chunks_and_leaves_their_end_to_the_reports() -> None:
    outputs = [_output(n, 0, f"job {n} says hello\n") for n in range(50)]
    statements = output_statements(outputs, reported=True)
    assert [statement.sql for statement in statements] == [queries.query("output_append")]
    assert [output.end() for output in outputs[:2]] == [17, 17]


def test_only_attempts_past_what_is_kept_are_trimmed() -> None:
    within = _output(1, 0, "short\n")
    past = _output(2, KEEP - 3, "crosses the cap\n")
    assert queries.query("output_trim") not in [s.sql for s in output_statements([within])]
    *_, trim = output_statements([within, past])
    assert trim.sql == queries.query("output_trim")
    [attempts] = [json.loads(str(value)) for value in trim.params.values()]
    assert [attempt["token"] for attempt in attempts] == ["token-2"]


def test_no_output_is_no_statement() -> None:
    assert output_statements([]) == []


def test_only_a_whole_small_output_sent_once_goes_inline() -> None:
    assert inline_text(None) is None
    assert inline_text(_output(1, 0, "one line\n", first_write=True)) == "one line\n"
    # Perhaps stored by a write whose answer was lost: it goes as a chunk, ignored if there.
    assert inline_text(_output(1, 0, "one line\n")) is None
    # The end of a job that printed before, or whose first bytes were dropped.
    assert inline_text(_output(1, 20, "the end\n", first_write=True)) is None
    limit = "x" * INLINE_MOST_BYTES
    big = AttemptOutput(Lease(1, "t"), (OutputChunk(0, len(limit), limit),), 1 << 20, True)
    assert inline_text(big) == limit
    over = msgspec.structs.replace(big, chunks=(OutputChunk(0, len(limit) + 1, limit + "x"),))
    assert inline_text(over) is None
    assert inline_text(msgspec.structs.replace(big, keep_bytes=100)) is None  # past the cap
    two = msgspec.structs.replace(big, chunks=(OutputChunk(0, 2, "a\n"), OutputChunk(2, 2, "b\n")))
    assert inline_text(two) is None


def test_a_reports_batch_has_no_statement_for_output_that_goes_inline() -> None:
    inline = [_output(n, 0, f"job {n} says hello\n", first_write=True) for n in range(50)]
    assert output_statements(inline, reported=True) == []
    # A flush stores it as chunks, inline or not: only a report has a row to put it in.
    assert len(output_statements(inline)) == 2
    [append] = output_statements([*inline, _output(99, 0, "flushed before\n")], reported=True)
    [chunks] = [json.loads(str(value)) for value in append.params.values()]
    assert [chunk["token"] for chunk in chunks] == ["token-99"]
