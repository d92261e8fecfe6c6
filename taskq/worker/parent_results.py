"""Before a job with parents starts: how its parents ended, for its child to read.

The job itself never reaches the store. When all of them came with the
claim (``ClaimedJob.first_parents``: a fan-in of a few parents, the common
case) they go to the child with the job's request. Otherwise the worker reads
the rest a page at a time into a file, which the child reads
(``sandbox/parents_file.py``, its format): a fan-in over ten thousand parents
never has ten thousand results in the worker's memory. The file is made by
``mkstemp`` (readable by the worker's user alone) and removed once the job
has ended.
"""

from __future__ import annotations

import contextlib
import os

import anyio.to_thread
import msgspec

from taskq import errors
from taskq.broker.ops.relatives import job_parent_results
from taskq.broker.records import ClaimedJob, ParentResult
from taskq.worker.running import RunningJob
from taskq.worker.sandbox import parents_file
from taskq.worker.sandbox.outcome import Outcome, Status, error_info
from taskq.worker.sandbox.protocol import JobRequest
from taskq.worker.store_runner import Run

PAGE = 200
"""How many parents' outcomes the worker reads from the store at a time."""


class ParentsFile:
    """A new file of a job's parents' outcomes, written a page at a time, in declared order."""

    def __init__(self, job_id: int) -> None:
        # Imported here, not with the module: tempfile is 2-3 ms of a worker's
        # start (random, shutil and the compression modules), and only a job
        # that reads its parents' results needs a file.
        import tempfile

        descriptor, self.path = tempfile.mkstemp(prefix=f"taskq-parents-{job_id}-", suffix=".jsonl")
        self._file = os.fdopen(descriptor, "wb")
        self.after_position = -1
        """The position of the last parent written: the next page starts after it."""
        self.complete = False
        """Every parent is in: the last page was short."""

    def add(self, page: list[ParentResult]) -> None:
        """Write one page, as ``job_parent_results(after_position=..., limit=PAGE)`` gave it."""
        self._file.write(parents_file.encode(page))
        if page:
            self.after_position = page[-1].position
        self.complete = len(page) < PAGE
        if self.complete:
            self._file.close()

    def add_first(self, parents: list[ParentResult], parent_count: int) -> None:
        """Write the outcomes that came with the claim: complete if they are all of them."""
        self._file.write(parents_file.encode(parents))
        self.after_position = parents[-1].position
        self.complete = len(parents) >= parent_count
        if self.complete:
            self._file.close()

    def remove(self) -> None:
        """Close and delete the file (the job has ended, or will not start)."""
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


async def write_parents_file(run: Run, job: ClaimedJob) -> str:
    """Write how the job's parents ended into a new file; its path, for the job's child.

    The first of them came with the claim (``ClaimedJob.first_parents``), and
    go in first; the rest are read a page at a time.
    """
    job_id = job.lease.job_id
    written = ParentsFile(job_id)
    try:
        if job.first_parents:
            # At most FIRST_PARENTS_BYTES into the page cache: cheaper here than a thread's hop.
            written.add_first(list(job.first_parents), job.parent_count)
        while not written.complete:
            page = await run(
                job_parent_results(job_id, after_position=written.after_position, limit=PAGE)
            )
            await anyio.to_thread.run_sync(written.add, page)
    except BaseException:
        written.remove()
        raise
    return written.path


async def with_parents(request: JobRequest, running: RunningJob, run: Run) -> JobRequest | Outcome:
    """``request`` with its parents' outcomes, or the file of them, which ``running`` then holds.

    A store or disk that fails to give them fails the attempt, as any error
    before the job's code would: retried by its policy.
    """
    job = running.job
    if job.first_parents is not None and len(job.first_parents) >= job.parent_count:
        # No file to make and remove: about a quarter of a millisecond of a fan-in's start.
        identity = msgspec.structs.replace(request.job, parents=job.first_parents)
        return msgspec.structs.replace(request, job=identity)
    try:
        path = await write_parents_file(run, job)
    except (errors.TaskqError, OSError) as exc:
        return Outcome(
            Status.ERROR,
            error=error_info(type(exc).__name__, f"its parents' results could not be read: {exc}"),
        )
    running.parents_file = path
    identity = msgspec.structs.replace(request.job, parents_file=path)
    return msgspec.structs.replace(request, job=identity)
