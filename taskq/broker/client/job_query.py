"""The typed listing of jobs: which ones ``client.list`` returns, on the store or over HTTP."""

from __future__ import annotations

import msgspec

from taskq.broker.records import JobState


class JobQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which jobs :meth:`Operations.list` returns: every filter given, newest first.

    ``state`` is a :class:`taskq.JobState` or its name (``state="succeeded"``);
    ``text`` matches a queue name exactly or any part of the payload. Pass
    the last id seen as ``before`` for the next page of ``limit`` (1 to 1000:
    :meth:`Operations.list` raises :class:`taskq.errors.InvalidJob` for another).
    """

    state: JobState | str | None = None
    queue: str | None = None
    worker_id: str | None = None
    submitter: str | None = None
    text: str | None = None
    workflow_id: int | None = None
    before: int | None = None
    limit: int = 50
