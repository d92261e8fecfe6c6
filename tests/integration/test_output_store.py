"""Live output in the store, on both stores: chunks written under a lease, capped, read back;
a short job's whole output stored inline with its report, read back the same."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import execution_list
from taskq.broker.ops.maintenance import job_prune, job_requeue_expired
from taskq.broker.ops.output import (
    INLINE_MOST_BYTES,
    AttemptOutput,
    OutputChunk,
    OutputReader,
    output_append,
)
from taskq.broker.ops.plan import Op
from taskq.broker.records import (
    AttemptEnded,
    ClaimedJob,
    JobState,
    OutputDropped,
    OutputEvent,
    OutputText,
)
from taskq.broker.stores.store import Statement, Store
from taskq.broker.stores.trampoline import Pause
from tests.support.reports import completed, failed, released, report_one

T0 = 1_800_000_000.0
LEASE = 30.0
Run = Callable[[Op[Any]], Any]
ERROR = {"type": "ValueError", "message": "failing attempt 1", "traceback": ""}


@pytest.fixture
def run(store: Store) -> Run:
    def carry_out(op: Op[Any]) -> Any:
        return plan.run(store, op)

    return carry_out


def _claimed(run: Run, max_attempts: int = 1) -> ClaimedJob:
    queue = f"q-{uuid.uuid4().hex[:10]}"
    spec = call_spec("tests.support.jobs:echo", [1], queue=queue, max_attempts=max_attempts)
    run(job_enqueue([spec], now=T0))
    claimed: list[ClaimedJob] = run(job_claim("w1", [queue], limit=1, lease_seconds=LEASE, now=T0))
    return claimed[0]


def _chunks(start: int, *texts: str) -> tuple[OutputChunk, ...]:
    chunks = []
    for text in texts:
        chunks.append(OutputChunk(start, len(text.encode()), text))
        start += len(text.encode())
    return tuple(chunks)


def _read_all(run: Run, reader: OutputReader) -> list[OutputEvent]:
    events: list[OutputEvent] = []
    while (page := reader.next_page()) is not None:
        events += run(page)
    return events


def _text(events: list[OutputEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, OutputText))


def test_chunks_written_under_a_lease_read_back_in_order(run: Run) -> None:
    job = _claimed(run)
    keep = 1 << 20
    run(output_append([AttemptOutput(job.lease, _chunks(0, "one\n", "two\n"), keep)]))
    # The same chunks again (a resend after an unknown outcome), then more.
    run(output_append([AttemptOutput(job.lease, _chunks(0, "one\n", "two\n", "three\n"), keep)]))
    events = _read_all(run, OutputReader(job.lease.job_id))
    assert _text(events) == "one\ntwo\nthree\n"
    assert events[-1] == OutputText(1, 8, 14, "three\n")  # still running: no end yet


def test_a_lease_that_moved_on_writes_nothing(run: Run) -> None:
    job = _claimed(run, max_attempts=2)
    run(job_requeue_expired(now=T0 + LEASE + 1))
    run(output_append([AttemptOutput(job.lease, _chunks(0, "zombie\n"), 1 << 20)]))
    [execution] = run(execution_list(job_id=job.lease.job_id))
    assert (execution.output_bytes, execution.log_tail) == (0, None)
    assert _read_all(run, OutputReader(job.lease.job_id, attempt=1)) == [
        AttemptEnded(1, "lease_expired", None, JobState.QUEUED)
    ]


def test_the_cap_drops_the_oldest_output_and_says_how_much(run: Run) -> None:
    job = _claimed(run)
    lines = [f"line {n:04}\n" for n in range(100)]  # 10 bytes each
    for n in range(0, 100, 10):
        chunks = _chunks(n * 10, *lines[n : n + 10])
        run(output_append([AttemptOutput(job.lease, chunks, keep_bytes=250)]))
    events = _read_all(run, OutputReader(job.lease.job_id))
    # The last 250 bytes kept, whole chunks: lines 75 to 99; the 750 before them dropped.
    assert events[0] == OutputDropped(1, 0, 750)
    assert _text(events) == "".join(lines[75:])


def test_the_report_carries_the_last_chunks_and_the_tail_is_read_from_them(run: Run) -> None:
    job = _claimed(run)
    run(output_append([AttemptOutput(job.lease, _chunks(0, "working\n"), 1 << 20)]))
    last = AttemptOutput(job.lease, _chunks(8, "done ✓\n"), 1 << 20)
    report = msgspec.structs.replace(completed(job.lease, 1), output=last)
    run(report_one(report, now=T0 + 2))
    [execution] = run(execution_list(job_id=job.lease.job_id))
    assert (execution.log_tail, execution.output_bytes) == ("working\ndone ✓\n", 17)
    events = _read_all(run, OutputReader(job.lease.job_id, follow=True))
    assert _text(events) == "working\ndone ✓\n"
    assert events[-1] == AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED)


def test_following_an_ended_job_from_an_earlier_attempt_reads_every_attempt_after_it(
    run: Run,
) -> None:
    first = _claimed(run, max_attempts=2)
    output = AttemptOutput(first.lease, _chunks(0, "first\n"), 1 << 20)
    run(report_one(msgspec.structs.replace(failed(first.lease, ERROR), output=output), now=T0))
    [second] = run(job_claim("w1", [first.queue], limit=1, lease_seconds=LEASE, now=T0 + 600))
    output = AttemptOutput(second.lease, _chunks(0, "second\n"), 1 << 20)
    run(report_one(msgspec.structs.replace(completed(second.lease, 1), output=output)))

    job_id = first.lease.job_id
    followed = _read_all(run, OutputReader(job_id, attempt=1, follow=True))
    # As a follower that started while the job ran would have read it: queued after attempt 1.
    assert followed == [
        OutputText(1, 0, 6, "first\n"),
        AttemptEnded(1, "error", ERROR, JobState.QUEUED),
        OutputText(2, 0, 7, "second\n"),
        AttemptEnded(2, "succeeded", None, JobState.SUCCEEDED),
    ]
    # Not following, attempt 1 alone, and the job as it is now.
    read = _read_all(run, OutputReader(job_id, attempt=1))
    assert read[-1] == AttemptEnded(1, "error", ERROR, JobState.SUCCEEDED)


def test_a_report_records_where_the_output_ends_with_or_without_the_last_chunks(
    run: Run,
) -> None:
    only_in_report = _claimed(run)
    last = AttemptOutput(only_in_report.lease, _chunks(0, "one line\n"), 1 << 20)
    run(report_one(msgspec.structs.replace(completed(only_in_report.lease, 1), output=last)))
    all_flushed = _claimed(run)
    run(output_append([AttemptOutput(all_flushed.lease, _chunks(0, "flushed\n"), 1 << 20)]))
    run(report_one(completed(all_flushed.lease, 1)))
    for job, text in ((only_in_report, "one line\n"), (all_flushed, "flushed\n")):
        [execution] = run(execution_list(job_id=job.lease.job_id))
        assert (execution.output_bytes, execution.log_tail) == (len(text), text)


def test_a_reader_resumes_from_a_byte_inside_a_chunk(run: Run) -> None:
    job = _claimed(run)
    run(output_append([AttemptOutput(job.lease, _chunks(0, "abcdef\n", "ghi\n"), 1 << 20)]))
    events = _read_all(run, OutputReader(job.lease.job_id, attempt=1, start=3))
    assert events == [OutputText(1, 3, 7, "def\n"), OutputText(1, 7, 11, "ghi\n")]


def test_output_is_pruned_with_its_attempt(run: Run, store: Store) -> None:
    job = _claimed(run)
    run(output_append([AttemptOutput(job.lease, _chunks(0, "bye\n"), 1 << 20)]))
    run(report_one(completed(job.lease, 1), now=T0 + 1))
    [execution] = run(execution_list(job_id=job.lease.job_id))
    count = Statement(
        "SELECT count(*) AS n FROM job_output WHERE execution_id = :id", {"id": execution.id}
    )
    assert store.query(count)[0]["n"] == 1
    run(job_prune(retention_seconds=1, now=T0 + 10))
    assert store.query(count)[0]["n"] == 0
    with pytest.raises(errors.JobNotFound):
        _read_all(run, OutputReader(job.lease.job_id))


def _pauses(store: Store, reader: OutputReader) -> bool:
    """Whether the reader's next page waits for output before it hands any."""
    page = reader.next_page()
    assert page is not None
    step = next(page)
    try:
        while not isinstance(step, Pause):
            step = page.send(plan.carry_out(store, step))
    except StopIteration:
        return False
    page.close()
    return True


def test_each_run_of_a_handed_back_attempt_is_read_by_its_run(run: Run, store: Store) -> None:
    first = _claimed(run)
    run(output_append([AttemptOutput(first.lease, _chunks(0, "first run\n"), 1 << 20)]))
    run(report_one(released(first.lease), now=T0 + 1))
    job_id = first.lease.job_id
    # Run 2 yet to start: a follower of it waits, a reader of what is stored is refused.
    assert _pauses(store, OutputReader(job_id, attempt=1, run=2, follow=True))
    with pytest.raises(errors.AttemptNotFound, match="has no run 2 of attempt 1 yet"):
        _read_all(run, OutputReader(job_id, attempt=1, run=2))

    [second] = run(job_claim("w1", [first.queue], limit=1, lease_seconds=LEASE, now=T0 + 2))
    assert second.attempt == 1  # the hand-back was not counted: attempt 1 runs again
    output = AttemptOutput(second.lease, _chunks(0, "second run\n"), 1 << 20, first_write=True)
    run(report_one(msgspec.structs.replace(completed(second.lease, 1), output=output)))

    # Resumed inside run 1, a follower reads the rest of run 1, then all of run 2.
    followed = _read_all(run, OutputReader(job_id, attempt=1, run=1, start=3, follow=True))
    assert followed == [
        OutputText(1, 3, 10, "st run\n", run=1),
        AttemptEnded(1, "released", None, JobState.QUEUED, run=1),
        OutputText(1, 0, 11, "second run\n", run=2),
        AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED, run=2),
    ]
    read = _read_all(run, OutputReader(job_id, attempt=1, run=1, start=3))
    assert _text(read) == "st run\n"
    assert _read_all(run, OutputReader(job_id, attempt=1, run=2)) == followed[2:]
    # The attempt's number alone is its latest run, as it was.
    assert _read_all(run, OutputReader(job_id, attempt=1)) == followed[2:]
    with pytest.raises(errors.AttemptNotFound, match="is succeeded and has no run 3 of attempt 1"):
        _read_all(run, OutputReader(job_id, attempt=1, run=3))


def test_bad_positions_are_refused_before_any_read() -> None:
    with pytest.raises(ValueError, match="numbered from 1"):
        OutputReader(1, attempt=0)
    with pytest.raises(ValueError, match="numbered from 1"):
        OutputReader(1, attempt=1, run=0)
    with pytest.raises(ValueError, match="give the attempt too"):
        OutputReader(1, run=1)
    with pytest.raises(ValueError, match="byte count"):
        OutputReader(1, start=-1)


def test_an_attempt_that_never_was_is_an_error(run: Run) -> None:
    job = _claimed(run)
    with pytest.raises(errors.AttemptNotFound):
        _read_all(run, OutputReader(job.lease.job_id, attempt=2))


# -- output stored inline with the report ----------------------------------------------


def _stored_rows(store: Store, job_id: int) -> tuple[int, str | None]:
    """How many job_output rows the job's attempt has, and its output_inline."""
    [row] = store.query(
        Statement(
            "SELECT output_inline, (SELECT count(*) FROM job_output "
            "WHERE execution_id = executions.id) AS chunks FROM executions WHERE job_id = :id",
            {"id": job_id},
        )
    )
    return int(row["chunks"]), row["output_inline"]


def _reported_with(run: Run, job: ClaimedJob, output: AttemptOutput) -> None:
    run(report_one(msgspec.structs.replace(completed(job.lease, 1), output=output), now=T0 + 2))


def test_a_short_jobs_whole_output_is_stored_inline_and_read_back_as_a_chunk_would_be(
    run: Run, store: Store
) -> None:
    job = _claimed(run)
    text = "hello ✓\nbye\n"
    _reported_with(run, job, AttemptOutput(job.lease, _chunks(0, text), 1 << 20, True))
    size = len(text.encode())
    assert _stored_rows(store, job.lease.job_id) == (0, text)  # no job_output row
    [execution] = run(execution_list(job_id=job.lease.job_id))
    assert (execution.log_tail, execution.output_bytes) == (text, size)
    ended = AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED)
    for follow in (False, True):
        events = _read_all(run, OutputReader(job.lease.job_id, follow=follow))
        assert events == [OutputText(1, 0, size, text), ended]
    # Resumed from inside it, from its end and past it: bytes [0, size) of the attempt.
    resumed = _read_all(run, OutputReader(job.lease.job_id, attempt=1, start=6))
    assert resumed == [OutputText(1, 6, size, text.encode()[6:].decode()), ended]
    for start in (size, size + 5):
        assert _read_all(run, OutputReader(job.lease.job_id, attempt=1, start=start)) == [ended]


def test_the_end_of_a_job_that_printed_before_is_stored_as_a_chunk(run: Run, store: Store) -> None:
    job = _claimed(run)
    run(output_append([AttemptOutput(job.lease, _chunks(0, "working\n"), 1 << 20, True)]))
    _reported_with(run, job, AttemptOutput(job.lease, _chunks(8, "done\n"), 1 << 20))
    assert _stored_rows(store, job.lease.job_id) == (2, None)
    [execution] = run(execution_list(job_id=job.lease.job_id))
    assert execution.log_tail == "working\ndone\n"
    assert _text(_read_all(run, OutputReader(job.lease.job_id))) == "working\ndone\n"


def test_output_sent_before_whose_answer_was_lost_is_not_stored_twice(
    run: Run, store: Store
) -> None:
    job = _claimed(run)
    # A flush stored the line but its worker never heard: the report carries it again.
    run(output_append([AttemptOutput(job.lease, _chunks(0, "once\n"), 1 << 20, True)]))
    _reported_with(run, job, AttemptOutput(job.lease, _chunks(0, "once\n"), 1 << 20, False))
    assert _stored_rows(store, job.lease.job_id) == (1, None)
    assert _text(_read_all(run, OutputReader(job.lease.job_id))) == "once\n"


def test_output_past_the_inline_limit_in_the_last_chunk_goes_to_job_output(
    run: Run, store: Store
) -> None:
    job = _claimed(run)
    text = "y" * INLINE_MOST_BYTES + "\n"
    _reported_with(run, job, AttemptOutput(job.lease, _chunks(0, text), 1 << 20, True))
    assert _stored_rows(store, job.lease.job_id) == (1, None)
    [execution] = run(execution_list(job_id=job.lease.job_id))
    assert (execution.log_tail, execution.output_bytes) == (text, len(text))
    assert _text(_read_all(run, OutputReader(job.lease.job_id, follow=True))) == text


def test_inline_output_is_fenced_and_pruned_with_its_attempt(run: Run, store: Store) -> None:
    job = _claimed(run, max_attempts=2)
    run(job_requeue_expired(now=T0 + LEASE + 1))
    _reported_with(run, job, AttemptOutput(job.lease, _chunks(0, "zombie\n"), 1 << 20, True))
    assert _stored_rows(store, job.lease.job_id) == (0, None)  # its lease moved on
    again: list[ClaimedJob] = run(
        job_claim("w2", [job.queue], limit=1, lease_seconds=LEASE, now=T0 + LEASE + 2)
    )
    [second] = again
    run(
        report_one(
            msgspec.structs.replace(
                completed(second.lease, 1),
                output=AttemptOutput(second.lease, _chunks(0, "bye\n"), 1 << 20, True),
            ),
            now=T0 + LEASE + 3,
        )
    )
    assert _text(_read_all(run, OutputReader(job.lease.job_id, attempt=1))) == ""
    assert _text(_read_all(run, OutputReader(job.lease.job_id, attempt=2))) == "bye\n"
    run(job_prune(retention_seconds=1, now=T0 + LEASE + 10))
    with pytest.raises(errors.JobNotFound):
        _read_all(run, OutputReader(job.lease.job_id))
