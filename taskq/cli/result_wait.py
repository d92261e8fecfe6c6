"""Waiting for a job's result on the command line (``submit --wait``, ``result --wait``).

Such a wait has no end by default, and a job that no worker will claim
waits forever: the client says why only once a wait's timeout runs out. So a
few seconds in, a wait whose job is still queued with no active worker to
claim it (of its queue, with its labels) says so once on stderr, in the
words such a timeout's error has, with how to start one, and goes on
waiting: the worker may be on its way.
"""

from __future__ import annotations

import threading
from typing import Any

from taskq import errors
from taskq.broker.client.client import JobHandle
from taskq.broker.records import JobState
from taskq.broker.unserved import unserved_queue
from taskq.cli import output

NOTE_AFTER_SECONDS = 3.0
"""How far into a wait it looks for a worker that serves the job: past the start of a
job that has one, well before its reader wonders."""


def result(handle: JobHandle, timeout: float | None, noted: set[str]) -> Any:
    """The job's result, waited for as :meth:`JobHandle.result` waits (``timeout`` None:
    as long as it takes), with the note on stderr should no worker serve it by
    :data:`NOTE_AFTER_SECONDS` in. ``noted``: the notes this command has said, each said once."""
    if timeout is not None and timeout <= NOTE_AFTER_SECONDS:
        return handle.result(timeout=timeout)
    # The note is looked for beside the one wait, not between two waits: a timeout's
    # error then counts from the wait's start, in the client's own words.
    note = threading.Timer(NOTE_AFTER_SECONDS, _note_unserved, (handle, noted))
    note.daemon = True
    note.start()
    interrupted = False
    try:
        return handle.result(timeout=timeout)
    except KeyboardInterrupt:
        interrupted = True  # the reader wants out now, not after a note's reads
        raise
    finally:
        note.cancel()
        if not interrupted:
            note.join()  # a note being said comes before the result or the error


def _note_unserved(handle: JobHandle, noted: set[str]) -> None:
    """Say that no active worker could claim the job, if it is still queued and none can."""
    try:
        job = handle.client.get(handle.id)
        if job.state is not JobState.QUEUED:
            return
        workers = handle.client.workers()
    except errors.TaskqError:
        # Not to be listed to this caller (a taskq serve's token), or the store did not
        # answer: the note is a courtesy, and the wait itself says what went wrong.
        return
    unserved = unserved_queue([job], workers)
    if unserved is not None and unserved not in noted:
        noted.add(unserved)
        output.warn(f"taskq: job {job.id} is still queued: {unserved}")
