"""Waiting on the command line for a job's result (``submit --wait``, ``result --wait``) or for
a workflow's end (``workflow wait``).

Such a wait has no end by default, and a job that no worker will claim
waits forever. The client's wait says why a few seconds in, once, on the
``taskq.waits`` logger (:data:`taskq.broker.unserved.WAIT_NOTES`): no
active worker serves its queue (with how to start one), or its queue holds
it back (paused, or at its cap of running jobs). A command's wait says it on
stderr as its own note, in the words such a timeout's error has, and goes
on waiting: the worker may be on its way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from taskq import errors
from taskq.broker.client.client import Client
from taskq.broker.records import Job, JobState, WorkflowInfo
from taskq.broker.unserved import WAIT_NOTES, queued_notes
from taskq.cli import output


class _NotesOnStderr(logging.Handler):
    """Says each note on stderr, each reason once (the jobs of a ``--json-job`` file in one
    unserved queue: one note)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        why = str(getattr(record, "why", record.getMessage()))
        if why not in self._said:
            self._said.add(why)
            output.warn(record.getMessage())


@contextlib.contextmanager
def notes_on_stderr() -> Iterator[None]:
    """While in the block, the notes of the waits go to stderr, and nowhere else."""
    handler = _NotesOnStderr()
    propagated = WAIT_NOTES.propagate
    WAIT_NOTES.addHandler(handler)
    WAIT_NOTES.propagate = False
    try:
        yield
    finally:
        WAIT_NOTES.removeHandler(handler)
        WAIT_NOTES.propagate = propagated


def workflow(client: Client, workflow_id: int, timeout: float | None) -> WorkflowInfo:
    """The workflow once every job of it has ended (:meth:`Client.wait_workflow`), its notes
    on stderr."""
    with notes_on_stderr():
        return client.wait_workflow(workflow_id, timeout=timeout)


def why_queued(client: Client, job: Job) -> str | None:
    """Why a queued ``job`` has not started, as a wait's note says it: no active worker serves
    its queue (and how to start one), or its queue holds it back; None when neither, or when
    the workers are not this caller's to read (a taskq serve's token)."""
    if job.state is not JobState.QUEUED:
        return None
    try:
        notes = queued_notes([job], client.workers(), client.stats())
    except errors.TaskqError:
        return None
    return notes[0][1] if notes else None
