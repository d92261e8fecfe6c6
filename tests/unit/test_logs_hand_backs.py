"""``taskq logs`` tells a worker's hand-back, which uses no attempt, from a counted attempt:
when following (``-f``), and when ``--attempt N`` prints one of several runs numbered N."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_cancel
from taskq.broker.ops.output import AttemptOutput, OutputChunk
from taskq.broker.records import AttemptEnded, JobState
from taskq.broker.stores.store import Store
from taskq.cli import logs
from taskq.cli.main import main
from tests.support.reports import completed, failed, released, report_one

QUEUE = "etl"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'taskq.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


def _run(store: Store, text: str, then: str, now: float) -> None:
    """Claim the queue's job at ``now``, store ``text`` as its output and end the attempt:
    ``then`` is ``released`` (a worker's hand-back), ``failed`` (counted) or ``succeeded``."""
    [job] = plan.run(store, job_claim("w1", [QUEUE], limit=1, lease_seconds=60, now=now))
    if then == "released":
        report = released(job.lease)
    elif then == "failed":
        report = failed(job.lease, {"type": "OSError", "message": "disk not mounted"})
    else:
        report = completed(job.lease, 1)
    chunk = OutputChunk(0, len(text.encode()), text)
    output = AttemptOutput(job.lease, (chunk,), keep_bytes=1 << 20)
    plan.run(store, report_one(msgspec.structs.replace(report, output=output), now=now + 1))


def _job(store: Store) -> int:
    [job_id] = plan.run(store, job_enqueue([call_spec("lab.etl:load", [1], queue=QUEUE)]))
    return int(job_id)


def test_following_a_handed_back_attempt_says_it_was_not_counted(
    store: Store, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _job(store)
    _run(store, "loading\n", "released", time.time())
    plan.run(store, job_cancel([job_id]))

    assert main(["logs", "--store", url, "-f", str(job_id)]) == 1
    err = capsys.readouterr().err
    assert "attempt 1 was handed back by its worker, not counted" in err, err
    assert "ended released" not in err, err


def test_an_attempts_end_says_which_attempt_runs_next() -> None:
    handed_back = AttemptEnded(attempt=1, outcome="released", error=None, job_state=JobState.QUEUED)
    error = {"type": "OSError", "message": "disk not mounted"}
    counted = AttemptEnded(attempt=1, outcome="error", error=error, job_state=JobState.QUEUED)

    assert logs._ending(handed_back) == (
        "[taskq: attempt 1 was handed back by its worker, not counted; "
        "the job's state: queued, to run as attempt 1]"
    )
    assert logs._ending(counted) == (
        "[taskq: attempt 1 ended error: OSError: disk not mounted; "
        "the job's state: queued, to run as attempt 2]"
    )


def test_an_end_names_a_run_of_its_attempt_past_the_first() -> None:
    again = AttemptEnded(1, "released", None, JobState.QUEUED, run=2)
    last = AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED, run=3)
    assert logs._ending(again) == (
        "[taskq: attempt 1 (run 2) was handed back by its worker, not counted; "
        "the job's state: queued, to run as attempt 1]"
    )
    assert (
        logs._ending(last)
        == "[taskq: attempt 1 (run 3) ended succeeded; the job's state: succeeded]"
    )


def test_printing_an_attempt_that_was_handed_back_before_says_so(
    store: Store, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _job(store)
    now = time.time()
    _run(store, "first run\n", "released", now)
    _run(store, "second run\n", "released", now + 10)
    _run(store, "third run\n", "succeeded", now + 20)

    assert main(["logs", "--store", url, str(job_id), "--attempt", "1"]) == 0
    out, err = capsys.readouterr()
    assert out == "third run\n"
    assert f"attempt 1 of job {job_id} was handed back by its worker 2 times before" in err, err

    # A counted attempt 1 that failed: attempt 1 was run once, and nothing is said of it.
    other = _job(store)
    _run(store, "only run\n", "failed", now + 30)
    _run(store, "retried\n", "succeeded", now + 3600)
    assert main(["logs", "--store", url, str(other), "--attempt", "1"]) == 0
    out, err = capsys.readouterr()
    assert out == "only run\n"
    assert "handed back" not in err, err


def test_a_hand_back_that_kept_its_reason_says_it() -> None:
    why = {"type": "HandedBack", "message": "handed back: the worker is draining; killed"}
    drained = AttemptEnded(1, "released", why, JobState.QUEUED)
    assert logs._ending(drained) == (
        "[taskq: attempt 1 was handed back by its worker (the worker is draining; killed), "
        "not counted; the job's state: queued, to run as attempt 1]"
    )
    refused = {"type": "PolicyRefused", "message": "this worker may not run lab.etl:load"}
    elsewhere = AttemptEnded(1, "released", refused, JobState.QUEUED)
    assert logs._ending(elsewhere) == (
        "[taskq: attempt 1 was handed back by its worker, not counted: PolicyRefused: this "
        "worker may not run lab.etl:load; the job's state: queued, to run as attempt 1]"
    )
