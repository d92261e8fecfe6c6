"""Whether a queued job has an active worker to claim it, and how to start one when none has;
whether its queue holds it back (paused, or at its cap of running jobs).

Said in the same words by a wait that ran out (``ops.job_waits``) and by a wait
that goes on (:func:`queued_notes`, on the :data:`WAIT_NOTES` logger) a few
seconds in: a leaf, of the records alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from taskq.broker import worker_policy
from taskq.broker.records import Job, JobState, PayloadKind, QueueStats, WorkerInfo

NOTE_AFTER_SECONDS = 3.0
"""How far into a wait for a job (or a workflow) its caller is told, once, why a job of it
that is still queued has not started: past the start of a job that has a worker, well
before its reader wonders."""

WAIT_NOTES = logging.getLogger("taskq.waits")
"""Where a wait says so: a warning, which Python prints on stderr where the program set up
no logging, and the command line prints as its own note."""


def queued_notes(
    jobs: Sequence[Job],
    workers: Sequence[WorkerInfo] | None,
    queues: Sequence[QueueStats] | None,
    whose: str = "",
) -> list[tuple[str, str]]:
    """For each queue of the queued ``jobs`` that no active worker of ``workers`` could
    claim, or that holds them back (of ``queues``), the line that says so, naming its
    first such job (``whose``: said after its id), beside its reason alone, which stays
    the same for every job of that queue."""
    notes: dict[str, str] = {}
    for job in jobs:
        why = unserved_queue([job], workers) or held_queue(job, queues)
        if why is not None and why not in notes:
            notes[why] = f"taskq: job {job.id}{whose} is still queued: {why}"
    return [(line, why) for why, line in notes.items()]


def unserved_queue(jobs: Sequence[Job], workers: Sequence[WorkerInfo] | None) -> str | None:
    """For the first queued job of ``jobs`` that no active worker of ``workers`` (None:
    not known) could claim, for its queue or its labels: that no worker serves it, and
    how to start one. None when each could be claimed (or the workers are not known)."""
    if workers is None:
        return None
    for job in jobs:
        if job.state is not JobState.QUEUED:
            continue
        needed = set(job.labels)
        if any(
            worker.state == "active" and job.queue in worker.queues and needed <= set(worker.labels)
            for worker in workers
        ):
            continue
        target = str(job.payload.get("target", "")) if job.kind is PayloadKind.CALL else ""
        if worker_policy.of_the_standard_library(target.partition(":")[0]):
            # Not "start one with --modules os": such a worker would run anything for anyone.
            return f"no worker runs {target}: {worker_policy.standard_library_advice(target)}"
        labels = ",".join(sorted(needed))
        start = ["taskq-worker", "--queues", job.queue, *_worker_flags(job)]
        if labels:
            start += ["--labels", labels]
        return (
            f"no active worker serves queue {job.queue!r}"
            + (f" with labels {labels}" if labels else "")
            + f" (start one: {' '.join(start)})"
        )
    return None


def held_queue(job: Job, queues: Sequence[QueueStats] | None) -> str | None:
    """For a queued ``job`` whose queue (of ``queues``; None: not known) holds its jobs back,
    paused or at its cap of running jobs: which, and how to let them start."""
    if queues is None or job.state is not JobState.QUEUED:
        return None
    stats = next((each for each in queues if each.queue == job.queue), None)
    if stats is None:
        return None
    name = job.queue
    if stats.paused:
        return f"queue {name!r} is paused (taskq resume {name} lets its jobs start)"
    if stats.max_running is None:
        return None
    running = stats.counts.get(JobState.RUNNING, 0)
    if stats.max_running == 0:
        return (
            f"queue {name!r} runs no job at once, its max running being 0 "
            f"(taskq limit {name} --max-running N lets them start)"
        )
    if running >= stats.max_running:
        return f"queue {name!r} runs at most {stats.max_running} at once, and {running} run now"
    return None


def _worker_flags(job: Job) -> list[str]:
    """What a worker must be told to run ``job``: its function's module, or its kind."""
    if job.kind is PayloadKind.SHELL:
        return ["--allow-shell"]
    if job.kind is PayloadKind.PYTHON_EXEC:
        return ["--allow-python-exec"]
    module = str(job.payload.get("target", "")).partition(":")[0]
    return ["--modules", module] if module else []
