"""Statements storing live output: one of each kind per batch, no trim when none is due."""

from __future__ import annotations

import json

from taskq.broker.ops import queries
from taskq.broker.ops.output import AttemptOutput, OutputChunk, output_statements
from taskq.broker.records import Lease

KEEP = 1000


def _output(job_id: int, start: int, text: str) -> AttemptOutput:
    chunk = OutputChunk(start, len(text.encode()), text)
    return AttemptOutput(Lease(job_id, f"token-{job_id}"), (chunk,), KEEP)


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
