"""Waiting for a job's result on the command line (``submit --wait``, ``result --wait``).

Such a wait has no end by default, and a job that no worker will claim
waits forever: the client says why only once a wait's timeout runs out. So a
few seconds in, a wait whose job is still queued with no active worker to
claim it (of its queue, with its labels) says so once on stderr, in the
words such a timeout's error has, with how to start one, and goes on
waiting: the worker may be on its way.
"""

from __future__ import annotations

import time
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
    started = time.monotonic()
    try:
        return handle.result(timeout=NOTE_AFTER_SECONDS)
    except errors.ResultTimeout:
        _note_unserved(handle, noted)
    if timeout is None:
        return handle.result()
    left = max(timeout - (time.monotonic() - started), 0.0)
    try:
        return handle.result(timeout=left)
    except errors.ResultTimeout as exc:
        # The client counts from its own call; the reader, from the wait's start.
        told = str(exc).replace(f" after {_seconds(left)} s", f" after {_seconds(timeout)} s", 1)
        raise errors.ResultTimeout(told) from None


def _note_unserved(handle: JobHandle, noted: set[str]) -> None:
    """Say that no active worker could claim the job, if it is still queued and none can."""
    job = handle.client.get(handle.id)
    if job.state is not JobState.QUEUED:
        return
    try:
        workers = handle.client.workers()
    except errors.TaskqError:  # not to be listed to this caller (a taskq serve's token)
        return
    unserved = unserved_queue([job], workers)
    if unserved is not None and unserved not in noted:
        noted.add(unserved)
        output.warn(f"taskq: job {job.id} is still queued: {unserved}")


def _seconds(seconds: float) -> str:
    """A wait's time as a timeout's error words it."""
    return f"{round(seconds, 2):g}"
