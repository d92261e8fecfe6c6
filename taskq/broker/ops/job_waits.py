"""Waiting for a job to end, and what a wait for a job or a workflow that ran out says
of why it has not ended: its attempts so far, a queue that holds it back, and a queue no
worker serves."""

from __future__ import annotations

import time
from collections.abc import Sequence

from taskq import errors
from taskq.broker.ops import attempt_notes
from taskq.broker.ops.jobs import job_get, job_list
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import job_counts
from taskq.broker.ops.relatives import job_relatives
from taskq.broker.ops.workers import worker_list
from taskq.broker.records import Job, JobState, QueueStats, WorkerInfo
from taskq.broker.stores.trampoline import Pause
from taskq.broker.unserved import (
    NOTE_AFTER_SECONDS,
    WAIT_NOTES,
    held_queue,
    queued_notes,
    unserved_queue,
)

QUEUED_LOOKED_AT = 50
"""How many of a workflow's queued jobs a wait that ran out reads, for a queue no worker
serves: a workflow's jobs share a few queues."""

QUEUED_PARENTS_LOOKED_AT = 5
"""How many queued parents of a waiting job outside a workflow a wait that ran out reads
whole, one read each, for a queue no worker serves."""


def job_wait(
    job_id: int, *, timeout: float | None, poll_seconds: float = 0.1, notes: bool = False
) -> Op[Job]:
    """Poll until the job finishes; raise ResultTimeout after ``timeout`` seconds.

    ``notes``: :data:`NOTE_AFTER_SECONDS` into the wait, should the job still be queued
    with nothing about to run it, say so once (:func:`note_queued`), and wait on."""
    deadline = None if timeout is None else time.monotonic() + timeout
    note_at = note_time(timeout) if notes else None
    delay = min(poll_seconds, 0.02)
    while True:
        job = yield from job_get(job_id)
        if job is None:
            raise errors.JobNotFound(f"no job with id {job_id}")
        if job.state.finished:
            return job
        if note_at is not None and time.monotonic() >= note_at:
            note_at = None
            yield from note_queued([job])
        if deadline is not None and time.monotonic() >= deadline:
            waited_on = (yield from queued_waited_on(job)) if job.state is JobState.WAITING else []
            # The workers are read only where the error may name them: a queued job, or
            # the queued jobs that a waiting one waits on.
            named = job.state is JobState.QUEUED or bool(waited_on)
            workers = (yield from worker_list()) if named else None
            queues = (yield from job_counts()) if job.state is JobState.QUEUED else None
            raise wait_ran_out(job, timeout or 0.0, workers, waited_on, queues)
        pause = delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0))
        yield Pause(pause)
        # Start fast (most jobs are short), then settle at poll_seconds.
        delay = min(delay * 2, poll_seconds)


def note_time(timeout: float | None) -> float | None:
    """When a wait of ``timeout`` seconds (None: no end) starting now says why its job has not
    started; None for a wait too short to need it."""
    if timeout is not None and timeout <= NOTE_AFTER_SECONDS:
        return None
    return time.monotonic() + NOTE_AFTER_SECONDS


def note_queued(jobs: Sequence[Job], whose: str = "") -> Op[None]:
    """Say on :data:`WAIT_NOTES`, of each queue of the queued ``jobs`` that no active worker
    serves or that holds them back, why its first such job has not started
    (:func:`taskq.broker.unserved.queued_notes`). A courtesy: a read refused, or failed,
    says nothing, and the wait goes on to say what went wrong, if anything."""
    queued = [job for job in jobs if job.state is JobState.QUEUED]
    if not queued:
        return
    try:
        workers = yield from worker_list()
        # A served queue may still hold its jobs back, paused or at its cap.
        served = any(unserved_queue([job], workers) is None for job in queued)
        queues = (yield from job_counts()) if served else None
    except errors.StoreError:
        return
    for line, why in queued_notes(queued, workers, queues, whose):
        WAIT_NOTES.warning(line, extra={"why": why})


def queued_waited_on(job: Job) -> Op[list[Job]]:
    """The queued jobs that the waiting ``job`` may wait on, in a few bounded reads: the
    first :data:`QUEUED_LOOKED_AT` of its workflow (its ancestors among them, however far
    up), or outside a workflow its first :data:`QUEUED_PARENTS_LOOKED_AT` queued parents."""
    if job.workflow_id is not None:
        return (
            yield from job_list(
                workflow_id=job.workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT
            )
        )
    relatives = yield from job_relatives(job.id, limit=QUEUED_LOOKED_AT)
    queued = [parent for parent, state in relatives.parents if state is JobState.QUEUED]
    found = []
    for parent_id in queued[:QUEUED_PARENTS_LOOKED_AT]:
        parent = yield from job_get(parent_id)
        if parent is not None:
            found.append(parent)
    return found


def wait_ran_out(
    job: Job,
    timeout: float,
    workers: Sequence[WorkerInfo] | None,
    waited_on: Sequence[Job] = (),
    queues: Sequence[QueueStats] | None = None,
) -> errors.ResultTimeout:
    """The error of a wait for ``job`` that ran out after ``timeout`` seconds.

    A queued job that ran before says how its last attempt ended and when the
    next runs. A queued job that no active worker of ``workers`` (None: not
    known) could claim, for its queue or its labels, most often means none was
    started: the error says so, and how to start one; so it does for a waiting
    job, of the first such job of ``waited_on`` (:func:`queued_waited_on`).
    A queued job whose queue (of ``queues``) is paused or at its cap says so.
    """
    said = f"job {job.id} is still {job.state.value} after {round(timeout, 2):g} s"
    notes = [
        attempt_notes.next_attempt(job, time.time()),
        held_queue(job, queues),
        unserved_queue([job], workers),
        _unserved_waited_on(job, waited_on, workers),
    ]
    told = "; ".join(note for note in notes if note)
    return errors.ResultTimeout(f"{said}: {told}" if told else said)


def _unserved_waited_on(
    job: Job, waited_on: Sequence[Job], workers: Sequence[WorkerInfo] | None
) -> str | None:
    """For the first job of ``waited_on`` that no active worker could claim: which job it
    is, whose (a parent of ``job``, or a job of its workflow) and the queue no worker serves."""
    for queued in waited_on:
        unserved = unserved_queue([queued], workers)
        if unserved is not None:
            whose = (
                f"its parent job {queued.id}"
                if job.workflow_id is None
                else f"job {queued.id} of its workflow {job.workflow_id}"
            )
            return f"{whose} is queued, and {unserved}"
    return None


def workflow_wait_ran_out(
    workflow_id: int,
    left: int,
    timeout: float,
    queued: Sequence[Job],
    workers: Sequence[WorkerInfo] | None,
) -> errors.ResultTimeout:
    """The error of a wait for a workflow that ran out with ``left`` jobs to end; as
    :func:`wait_ran_out`, naming a queue of its ``queued`` jobs no worker serves."""
    said = f"workflow {workflow_id} still has {left} job(s) to end after {round(timeout, 2):g} s"
    unserved = unserved_queue(queued, workers)
    return errors.ResultTimeout(said if unserved is None else f"{said}: {unserved}")
