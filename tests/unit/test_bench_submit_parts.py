"""The bench's single submit taken apart: the store write alone writes one whole job each time."""

from __future__ import annotations

from pathlib import Path

from bench import submit_parts
from taskq import JobQuery, JobState
from taskq.broker.client.client import Client


def test_each_write_alone_stores_a_job_of_its_own(tmp_path: Path) -> None:
    with Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        timings = submit_parts.write_alone(client, "bench.jobs:echo", "parts", 5)

        jobs = client.list(JobQuery(queue="parts"))

    assert len(timings) == 5
    assert all(seconds > 0 for seconds in timings)
    # Five jobs, not one: each write carried a key of its own.
    assert len(jobs) == 5
    assert {job.state for job in jobs} == {JobState.QUEUED}
    assert {job.submitter for job in jobs} == {client.submitter}


def test_submits_and_writes_alone_are_taken_in_blocks_in_turn(tmp_path: Path) -> None:
    with Client(f"sqlite://{tmp_path / 'taskq.db'}") as client:
        submits, writes = submit_parts.in_turn(client, "bench.jobs:echo", "parts", 12, blocks=3)

        jobs = client.list(JobQuery(queue="parts"))

    assert len(submits) == len(writes) == 3
    assert all(seconds > 0 for seconds in submits + writes)
    # Four submits and four writes a block: every one of them a job of its own.
    assert len(jobs) == 24
