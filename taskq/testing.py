"""Testing code that submits jobs: a temporary store, and jobs run inline, in this process.

::

    import taskq.testing

    def test_resize() -> None:
        with taskq.testing.temporary_client(modules=["myapp.tasks"]) as client:
            handle = client.submit("myapp.tasks:resize", "in.png", 800)
            taskq.testing.run_due(client)
            assert handle.result() == {"width": 800}

``run_due`` claims each due job from the store as a worker would, runs it in
this process (no child: a job's limits and timeout are not enforced, and a
``shell`` job is refused), and reports its outcome through the same
statements: a result is encoded and checked as a worker's child does it,
``taskq.Retry``, ``taskq.Abort``, the job's retry policy and its
checkpoints behave as under a worker, and ``taskq.current_job()`` works in
the job. ``run_due(client, delayed=True)`` also runs jobs that are not due
yet (retries waiting out their backoff, delayed submissions), moving the
store's clock to each one's time, so a test of retries never sleeps.

A workflow runs the same way: a job whose parents have ended is due, reads
their results with ``parent_results()``, and what it spawns is written with
its success, to run next (its steps by name resolved as a worker resolves
them: a name no worker declares fails the job, spawning nothing). To test
one job's code alone, ``as_job`` runs a block as that job would run, with
the parents' results you give::

    with taskq.testing.as_job(parent_results=[4, 9]) as job:
        assert build_index() == {"count": 2}
    assert job.spawned is None   # or the WorkflowSubmission it spawned
"""

from __future__ import annotations

import contextlib
import importlib
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from taskq import errors, job_context
from taskq.broker.client import declared
from taskq.broker.client.client import Client
from taskq.broker.limits import Limits
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.functions import function_publish
from taskq.broker.ops.jobs import job_next_run_at
from taskq.broker.ops.leases import job_report
from taskq.broker.ops.queues import job_counts
from taskq.broker.ops.relatives import job_parent_results
from taskq.broker.records import ClaimedJob, JobState, ParentResult, PayloadKind
from taskq.broker.stores.store import Store
from taskq.broker.worker_policy import Policy
from taskq.job_context import JobContext, JobUpdate
from taskq.worker import spawn_names
from taskq.worker.module_check import one_per_name
from taskq.worker.parent_results import PAGE, ParentsFile
from taskq.worker.reports import report_of
from taskq.worker.sandbox import job_process, judging, protocol
from taskq.worker.sandbox.outcome import Outcome, refused_outcome
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.supervision import EndReason, Supervised

INLINE_WORKER_ID = "inline"
"""The worker id the store records for jobs run by :func:`run_due`."""
_LEASE_SECONDS = 3600.0  # no heartbeats inline: a lease that outlasts any test


@contextlib.contextmanager
def temporary_client(*, modules: Iterable[str] = (), **options: Any) -> Iterator[Client]:
    """A :class:`taskq.Client` on a new SQLite store that is deleted afterwards.

    Inside the block it is the default client (:func:`taskq.set_default_client`),
    so a declared job's ``resize.submit(...)`` goes to it too, not to the store
    the machine names; the default before it comes back at the block's end.
    The store skips fsync (a test's jobs need not survive a power cut);
    ``options`` go to the client (``submitter=...``). The ``@taskq.job``
    declarations of ``modules`` are published as a worker of them would
    publish them, so that submits by name (``client.submit("myapp.tasks:resize")``)
    find them; a name no module declares is found if this process imports
    it, else needs ``unchecked=True``.
    """
    with tempfile.TemporaryDirectory(prefix="taskq-test-") as directory:
        url = f"sqlite://{Path(directory) / 'taskq.db'}?synchronous=off"
        with Client(url, **options) as client, declared.default_client_as(client):
            # Joined as a worker joins its --modules' reports: a job one module imports
            # from another is published once.
            published = one_per_name(
                job
                for module in modules
                for job in declared.declared_in(importlib.import_module(module))
            )
            if published:
                plan.run(client.store, function_publish(INLINE_WORKER_ID, published))
            yield client


def run_due(client: Client, *, delayed: bool = False, max_jobs: int = 10_000) -> list[int]:
    """Run, one at a time in this process, every job of ``client``'s store that is due.

    Runs until none is left due (a job that fails and is due again at once
    runs again); with ``delayed``, until none is queued at all. Returns the
    ids of the jobs run, once per attempt. ``max_jobs`` bounds the run, in
    case a job keeps submitting more.
    """
    ran: list[int] = []
    while len(ran) < max_jobs:
        stats = plan.run(client.store, job_counts())
        queues = [queue.queue for queue in stats if queue.counts.get(JobState.QUEUED)]
        if not queues:
            break
        now = None
        if delayed:
            next_run_at = plan.run(client.store, job_next_run_at())
            now = max(time.time(), next_run_at) if next_run_at is not None else None
        claimed = plan.run(
            client.store,
            job_claim(INLINE_WORKER_ID, queues, limit=1, lease_seconds=_LEASE_SECONDS, now=now),
        )
        if not claimed:
            break
        [job] = claimed
        outcome, checkpoint_json = _run_inline(job, client.store)
        if outcome.spawn_by_name:
            outcome = _with_spawn_resolved(outcome, client)
        report = report_of(job, None, outcome, checkpoint_json)
        # At the claim's time: the store's clock must not run back past the job's start.
        plan.run(client.store, job_report([report], now=now))
        ran.append(job.lease.job_id)
    return ran


def _with_spawn_resolved(outcome: Outcome, client: Client) -> Outcome:
    """The steps by name of ``outcome``'s spawn resolved as a worker resolves them; or the
    attempt failed for good, spawning nothing, when one is refused."""
    assert outcome.spawn is not None, "only a spawn has steps by name"
    steps = spawn_names.resolve_spawn(outcome.spawn, outcome.spawn_by_name, client.declarations)
    try:
        return spawn_names.with_spawn(outcome, plan.run(client.store, steps))
    except errors.InvalidJob as exc:
        return spawn_names.refused(outcome, exc)


def _run_inline(job: ClaimedJob, store: Store) -> tuple[Outcome, str | None]:
    """Run ``job`` in this process as a sandbox child would; its outcome and last checkpoint."""
    if not job.parent_count:
        return _run_prepared(job, None)
    # Its parents' results, page by page into a file, as a worker hands them to its child.
    written = ParentsFile(job.lease.job_id)
    try:
        while not written.complete:
            page = job_parent_results(
                job.lease.job_id, after_position=written.after_position, limit=PAGE
            )
            written.add(plan.run(store, page))
        return _run_prepared(job, written.path)
    finally:
        written.remove()


def _run_prepared(job: ClaimedJob, parents_file: str | None) -> tuple[Outcome, str | None]:
    module = str(job.payload.get("target", "")).partition(":")[0]
    # Any module's job may run inline: the test chose what it submits.
    preparer = JobPreparer(
        policy=Policy(modules=(module.split(".")[0],) if module else (), allow_python_exec=True),
        worker_max=Limits(),
    )
    # Before the policy's check, which would say shell jobs are off "on this worker".
    if job.kind is PayloadKind.SHELL:
        return refused_outcome("shell jobs run only under a worker, not inline"), None
    request = preparer.prepare(job)
    if isinstance(request, Outcome):
        return request, None
    if parents_file is not None:
        identity = msgspec.structs.replace(request.job, parents_file=parents_file)
        request = msgspec.structs.replace(request, job=identity)
    updates: list[JobUpdate] = []
    started = time.monotonic()
    body = job_process.run_job(request, updates.append)
    report = protocol.parse_report(body)
    supervised = Supervised(
        EndReason.REPORTED, report, None, None, 0, "", time.monotonic() - started
    )
    outcome = judging.decide_outcome(supervised, kind=request.payload.kind, limits=request.limits)
    return outcome, updates[-1].checkpoint_json if updates else None


@contextlib.contextmanager
def as_job(
    *, parent_results: Iterable[Any] = (), job_id: int = 1, attempt: int = 1, queue: str = "default"
) -> Iterator[JobContext]:
    """Run the block as job ``job_id`` would run: ``taskq.current_job()`` answers in it.

    ``parent_results`` are its parents' outcomes, in order: each a
    ``taskq.ParentResult``, or any other value as the result of a parent
    that succeeded. What the block spawns is the context's ``spawned`` (a
    ``WorkflowSubmission``), kept, not written anywhere.
    """
    parents = [
        parent
        if isinstance(parent, ParentResult)
        else ParentResult(position, position + 1, JobState.SUCCEEDED, parent)
        for position, parent in enumerate(parent_results)
    ]
    context = JobContext(
        id=job_id,
        attempt=attempt,
        queue=queue,
        max_attempts=max(attempt, 1),
        parent_count=len(parents),
        parents=lambda: iter(parents),
    )
    job_context.enter(context)
    try:
        yield context
    finally:
        context.close()
        job_context.enter(None)
