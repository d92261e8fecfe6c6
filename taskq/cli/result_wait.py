"""Waiting on the command line for a job's result (``submit --wait``, ``result --wait``) or for
a workflow's end (``workflow wait``).

Such a wait has no end by default, and a job that no worker will claim
waits forever: the client says why only once a wait's timeout runs out. So a
few seconds in, a wait whose job (or a job of whose workflow) is still queued
with no active worker to claim it (of its queue, with its labels), or held
by its queue (paused, or at its cap of running jobs), says so once on
stderr, in the words such a timeout's error has, with how to start one or
let it start, and goes on waiting: the worker may be on its way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from taskq import errors
from taskq.broker.client.client import Client, JobHandle, JobQuery
from taskq.broker.records import Job, JobState, QueueStats, WorkflowInfo
from taskq.broker.unserved import held_queue, unserved_queue
from taskq.cli import output

T = TypeVar("T")

NOTE_AFTER_SECONDS = 3.0
"""How far into a wait it looks for a worker that serves the job: past the start of a
job that has one, well before its reader wonders."""

QUEUED_LOOKED_AT = 50
"""How many of a workflow's queued jobs the note reads: a workflow's jobs share a few queues."""


def result(handle: JobHandle, timeout: float | None, noted: set[str]) -> Any:
    """The job's result, waited for as :meth:`JobHandle.result` waits (``timeout`` None:
    as long as it takes), with the note on stderr should no worker serve it by
    :data:`NOTE_AFTER_SECONDS` in. ``noted``: the notes this command has said, each said once."""

    def queued() -> list[Job]:
        return [handle.client.get(handle.id)]

    return _noted(lambda: handle.result(timeout=timeout), timeout, handle.client, queued, noted)


def workflow(client: Client, workflow_id: int, timeout: float | None) -> WorkflowInfo:
    """The workflow once every job of it has ended, waited for as
    :meth:`Client.wait_workflow` waits, with the note of :func:`result` for its queued jobs."""

    def queued() -> list[Job]:
        query = JobQuery(workflow_id=workflow_id, state=JobState.QUEUED, limit=QUEUED_LOOKED_AT)
        return client.list(query)

    def wait() -> WorkflowInfo:
        return client.wait_workflow(workflow_id, timeout=timeout)

    return _noted(wait, timeout, client, queued, set(), f" of workflow {workflow_id}")


def _noted(
    wait: Callable[[], T],
    timeout: float | None,
    client: Client,
    queued: Callable[[], Sequence[Job]],
    noted: set[str],
    whose: str = "",
) -> T:
    """``wait()``, and beside it, :data:`NOTE_AFTER_SECONDS` in, the note of each queue of
    the ``queued()`` jobs no active worker serves (``whose``: said after a job's id)."""
    if timeout is not None and timeout <= NOTE_AFTER_SECONDS:
        return wait()
    # The note is looked for beside the one wait, not between two waits: a timeout's
    # error then counts from the wait's start, in the client's own words.
    note = threading.Timer(NOTE_AFTER_SECONDS, _note_unserved, (client, queued, noted, whose))
    note.daemon = True
    note.start()
    interrupted = False
    try:
        return wait()
    except KeyboardInterrupt:
        interrupted = True  # the reader wants out now, not after a note's reads
        raise
    finally:
        note.cancel()
        if not interrupted:
            note.join()  # a note being said comes before the result or the error


def _note_unserved(
    client: Client, queued: Callable[[], Sequence[Job]], noted: set[str], whose: str
) -> None:
    """Say, of each queue of the jobs still queued that no active worker could claim, that
    none does, or that it holds them (paused, at its cap), naming its first such job."""
    try:
        jobs = [job for job in queued() if job.state is JobState.QUEUED]
        if not jobs:
            return
        workers = client.workers()
    except errors.TaskqError:
        # Not to be listed to this caller (a taskq serve's token), or the store did not
        # answer: the note is a courtesy, and the wait itself says what went wrong.
        return
    queues: list[QueueStats] | None = None
    for job in jobs:
        why = unserved_queue([job], workers)
        if why is None:
            # Served: a paused queue, or one at its cap, holds it all the same.
            if queues is None:
                try:
                    queues = client.stats()
                except errors.TaskqError:
                    queues = []
            why = held_queue(job, queues)
        if why is not None and why not in noted:
            noted.add(why)
            output.warn(f"taskq: job {job.id}{whose} is still queued: {why}")
