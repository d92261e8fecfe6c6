"""taskq.worker.lowered_limits: which limits a worker lowered, and an attempt's error told of it."""

from __future__ import annotations

from taskq.broker.limits import Limits
from taskq.worker.lowered_limits import described, lowered, told
from taskq.worker.sandbox.outcome import Outcome, Status, error_info

ASKED = Limits(memory_bytes=4 * 2**30, cpu_seconds=1200, wall_seconds=7200)
WORKER_MOST = Limits(memory_bytes=2**30, cpu_seconds=600, wall_seconds=7200)


def test_only_the_limits_lowered_are_named_with_what_was_asked() -> None:
    found = lowered(ASKED, ASKED.bounded_by(WORKER_MOST))
    assert found == {"memory_bytes": (4 * 2**30, 2**30), "cpu_seconds": (1200, 600)}
    assert described(found) == "memory_bytes 4.0 GiB to 1.0 GiB, cpu_seconds 1200 s to 600 s"
    assert lowered(WORKER_MOST, WORKER_MOST) == {}


def test_an_attempt_ended_at_a_lowered_limit_says_what_the_job_asked_for() -> None:
    found = lowered(ASKED, ASKED.bounded_by(WORKER_MOST))
    ended = Outcome(Status.MEMORY, error=error_info("MemoryError", "out of memory"))
    message = told(ended, found).error
    assert message is not None
    assert message["message"] == (
        "out of memory (the job asked for memory_bytes 4.0 GiB; this worker's "
        "[worker.max_limits] lowered it to 1.0 GiB)"
    )


def test_an_attempt_ended_otherwise_is_left_as_it_is() -> None:
    found = lowered(ASKED, ASKED.bounded_by(WORKER_MOST))
    timed_out = Outcome(Status.TIMEOUT, error=error_info("Timeout", "killed"))  # wall not lowered
    failed = Outcome(Status.ERROR, error=error_info("ValueError", "bad"))
    assert told(timed_out, found) == timed_out
    assert told(failed, found) == failed
