"""A workflow's status, read from how many of its jobs are in each state."""

from __future__ import annotations

import pytest

from taskq.broker.records import JobState, WorkflowStatus

Q, W, R = JobState.QUEUED, JobState.WAITING, JobState.RUNNING
S, F, D, C = JobState.SUCCEEDED, JobState.FAILED, JobState.DEAD, JobState.CANCELLED


@pytest.mark.parametrize(
    ("states", "status"),
    [
        ((Q,), WorkflowStatus.RUNNING),
        ((W, S), WorkflowStatus.RUNNING),
        ((R, F, C), WorkflowStatus.RUNNING),  # a failure does not end it while a job runs
        ((S, S), WorkflowStatus.SUCCEEDED),
        ((S, F), WorkflowStatus.FAILED),
        ((D, C), WorkflowStatus.FAILED),  # its end cancelled the rest
        ((S, C), WorkflowStatus.CANCELLED),
        ((C,), WorkflowStatus.CANCELLED),
    ],
)
def test_a_workflow_runs_until_every_job_ended_then_its_ends_name_it(
    states: tuple[JobState, ...], status: WorkflowStatus
) -> None:
    counts = dict.fromkeys(JobState, 0)
    for state in states:
        counts[state] += 1
    assert WorkflowStatus.of(counts) is status
    # Only the states present count, not those listed with none.
    assert WorkflowStatus.of({state: counts[state] for state in states}) is status
