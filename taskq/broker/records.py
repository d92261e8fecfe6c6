"""The broker's shared types: job states and the records operations return.

Nearly a leaf: of taskq it imports only ``worker_policy`` (a leaf itself, for
the policy a worker records), so every layer can use it.
Every record is a msgspec Struct (frozen where it is a value): as immutable
as a frozen dataclass, several times faster to build, and one kind of thing
for every reader (``taskq --json`` among them).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any

import msgspec

from taskq.broker.worker_policy import Policy


class JobState(enum.StrEnum):
    """Where a job is in its life, and which operation moves it on.

    ============  ==========================================================
    state         left by
    ============  ==========================================================
    waiting       the last of its parents ending (to queued, in the same
                  transaction; to cancelled at once when a parent ends
                  failed, dead or cancelled and the job does not
                  ``run_anyway``); ``job_cancel`` (to cancelled)
    queued        ``job_claim`` (to running, when run_at has come);
                  ``job_cancel`` (to cancelled)
    running       ``job_report`` of a completion (succeeded), of a failure
                  (queued again with a later run_at while attempts remain,
                  else dead; dead at once when the job gave up, failed when
                  the error is not retryable), or
                  of a release (queued, the attempt not counted; cancelled
                  when a cancel was requested); ``job_requeue_expired`` when
                  the lease ran out
                  (queued, dead when attempts are used up, cancelled when a
                  cancel was requested)
    succeeded     ``job_prune`` after the retention (deleted)
    failed        ``job_retry`` by hand (queued); ``job_prune``
    dead          ``job_retry`` by hand (queued); ``job_prune``
    cancelled     ``job_retry`` by hand (queued); ``job_prune``;
                  retrying the parent that cancelled it (waiting)
    ============  ==========================================================

    A finished job is pruned only once none of its children still waits
    for it or has yet to read its result.
    """

    QUEUED = "queued"
    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in FINISHED_STATES


FINISHED_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.DEAD, JobState.CANCELLED}
)

JOB_STATES: dict[str, JobState] = {state.value: state for state in JobState}
"""Each state by its stored name: for rows read many at a time, where a call of
``JobState`` costs about a microsecond a row."""


class PayloadKind(enum.StrEnum):
    """What a worker runs: an importable function, code, or a command."""

    CALL = "call"
    PYTHON_EXEC = "python_exec"
    SHELL = "shell"


class JobSpec(msgspec.Struct, frozen=True):
    """Everything needed to enqueue one job; times are relative to the store's clock.

    Values are kept as given: the broker checks each one, exactly, when the
    job is enqueued (see ``taskq.broker.job_validation``).
    """

    kind: PayloadKind
    payload: dict[str, Any]
    queue: str = "default"
    priority: int = 0
    delay: float = 0.0
    run_at: float | None = None
    max_attempts: int | None = None
    """None: the queue's default (``taskq queue set``), else 3."""
    timeout: float | None = None
    """None: the queue's default, else none (the worker's own maximum bounds every job)."""
    limits: dict[str, Any] = msgspec.field(default_factory=dict)
    """Laid over the queue's default limits, name by name."""
    labels: Collection[str] = ()
    idempotency_key: str | None = None
    submitter: str = ""
    retry: dict[str, Any] | None = None
    """The retry policy (``taskq.RetryPolicy.to_dict()``); None: the queue's, else the default."""
    after: tuple[int, ...] = ()
    """Ids of stored jobs this one runs after (its parents, in order): it waits until
    every one has ended. They are all in one workflow (or all in none), which it joins."""
    run_anyway: bool = False
    """Run once every parent has ended, whatever their outcome; by default a parent
    that ends failed, dead or cancelled cancels this job (and so its own children)."""


class Job(msgspec.Struct, frozen=True):
    """A job as stored."""

    id: int
    queue: str
    kind: PayloadKind
    payload: dict[str, Any]
    state: JobState
    priority: int
    run_at: float
    attempts: int
    max_attempts: int
    timeout: float | None
    limits: dict[str, Any]
    labels: tuple[str, ...]
    idempotency_key: str
    submitter: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    worker_id: str | None
    """The worker of its attempt under way while it runs, and of the attempt that ended it;
    None while it is queued or waiting, as ``started_at`` and ``claimed_at`` are: no worker
    holds it then (each attempt keeps its worker: ``Execution.worker_id``)."""
    lease_until: float | None
    cancel_requested: bool
    progress: float | None
    progress_message: str | None
    result: Any
    error: dict[str, Any] | None
    retry: dict[str, Any] | None = None
    """The job's retry policy as stored; None: the default policy."""
    checkpoint: Any = None
    """What the job's attempts last saved with ``taskq.current_job().checkpoint``."""
    claimed_at: float | None = None
    """When its latest attempt was claimed. ``started_at`` is when that attempt's
    code started, once it has reported; a job claimed ahead of a free slot waits
    in between. Before the report, ``started_at`` is the claim. Both None while the
    job is queued or waiting (again)."""
    workflow_id: int | None = None
    """The workflow it belongs to; None: a job on its own."""
    run_anyway: bool = False
    """Whether it runs even when a parent ended failed, dead or cancelled."""
    parents_left: int = 0
    """How many of its parents have not ended yet (0 for a job without parents)."""


class Lease(msgspec.Struct, frozen=True):
    """A claimed job's proof of ownership: every report must carry it."""

    job_id: int
    token: str


class ClaimedJob(msgspec.Struct, frozen=True):
    """What a worker needs to run a job it now holds."""

    lease: Lease
    kind: PayloadKind
    payload: dict[str, Any]
    queue: str
    attempt: int
    max_attempts: int
    timeout: float | None
    limits: dict[str, Any]
    lease_until: float
    retry: dict[str, Any] | None = None
    """The job's retry policy as stored; None: the default policy."""
    checkpoint_json: str | None = None
    """What an earlier attempt saved (JSON text), for this one to resume from."""
    parent_count: int = 0
    """How many parents the job has: with any, ``job_parent_results`` tells how they ended."""
    has_children: bool = False
    """Other jobs named the job as a parent when it was claimed: its report may release them.
    (A job named later, while it runs, reports as any other: in bounded time, not at once.)"""
    first_parents: tuple[ParentResult, ...] | None = None
    """How its first parents ended, handed over with the claim (all of them when there are
    ``parent_count``; fewer when they were many or large: ``job_parent_results`` has the rest)."""


class Execution(msgspec.Struct, frozen=True):
    """One attempt at a job."""

    id: int
    job_id: int
    attempt: int
    worker_id: str
    started_at: float
    finished_at: float | None
    outcome: str | None
    exit_code: int | None
    signal: int | None
    peak_rss_bytes: int | None
    cpu_seconds: float | None
    log_tail: str | None
    """The end of its output (stdout, stderr, logging), read from the output it stored."""
    error: dict[str, Any] | None
    claimed_at: float | None = None
    """When the attempt was claimed; ``started_at`` is when its code started
    (the claim, until the attempt reports), ``finished_at`` when it ended."""
    output_bytes: int = 0
    """How much output it wrote (so far), the part not kept included."""


HANDED_BACK_ERROR = "HandedBack"
"""The error type on the record of a run its worker handed back (a drain, a job claimed
ahead that no slot started): its message says why, and the run used no attempt."""


class AttemptReport(msgspec.Struct, frozen=True):
    """How an attempt went, as the worker measured it (all optional)."""

    outcome: str
    exit_code: int | None = None
    signal: int | None = None
    peak_rss_bytes: int | None = None
    cpu_seconds: float | None = None
    waited_seconds: float | None = None
    """From the claim to the start of the job's code: a job claimed ahead waits for a slot."""
    ran_seconds: float | None = None
    """From the start of the job's code to its end. Both are the worker's own
    measures of time spans; the store places them after its own claim time."""


LIVE_SECONDS = 30.0
"""A worker is live while its last heartbeat is at most this old (the lost-worker grace)."""


class WorkerInfo(msgspec.Struct, frozen=True):
    """A worker as registered in the store."""

    id: str
    name: str
    host: str
    pid: int
    queues: tuple[str, ...]
    labels: tuple[str, ...]
    slots: int
    running: int
    state: str
    started_at: float
    heartbeat_at: float
    max_slots: int | None = None
    """The most slots an autoscaling worker may grow to (``slots``: how many now); None: fixed."""
    policy: Policy | None = None
    """What it may run, as it recorded when it registered; None: a worker of a taskq before
    policies were recorded, or one whose policy this taskq cannot read."""


class QueueStats(msgspec.Struct, frozen=True):
    """Counts per state of one queue, whether it is paused, and its limits."""

    queue: str
    paused: bool
    counts: dict[JobState, int]
    max_running: int | None = None
    rate_limit: float | None = None
    rate_period: float | None = None
    job_defaults: dict[str, Any] = msgspec.field(default_factory=dict)
    """What its jobs get when they say none: timeout, max_attempts, limits, retry."""


class Fenced(enum.Enum):
    """The outcome of a report made under a lease."""

    ACCEPTED = "accepted"
    # The lease is gone (expired and requeued, or the job was cancelled):
    # the worker must stop the job and drop its result.
    LEASE_LOST = "lease_lost"


class Retention(msgspec.Struct, frozen=True):
    """How long the store keeps finished jobs before maintenance prunes them.

    Seconds after a job ended; None: kept until pruned by hand (``taskq prune``).
    """

    succeeded_seconds: float | None
    """Jobs that succeeded."""
    failed_seconds: float | None
    """Jobs that failed, died or were cancelled."""


class WorkflowSubmission(msgspec.Struct, frozen=True):
    """A whole workflow, written in one request: all of it or nothing."""

    jobs: tuple[JobSpec, ...]
    parents: tuple[tuple[int, ...], ...] = ()
    """Per job, the positions in ``jobs`` of its parents in this submission (empty,
    or shorter than ``jobs``: none). A job's own ``after`` names stored parents,
    which must belong to the workflow extended."""
    name: str = ""
    idempotency_key: str | None = None
    """One key for the whole: a resend of the same request returns the same ids."""
    workflow_id: int | None = None
    """Extend this stored workflow (a running job's fan-out) instead of starting one."""
    submitter: str = ""


class SubmittedWorkflow(msgspec.Struct, frozen=True):
    """A workflow's id and its new jobs' ids, in the order submitted."""

    id: int
    job_ids: tuple[int, ...]


class WorkflowStatus(enum.StrEnum):
    """Where a workflow is, from its jobs' states (:meth:`of`).

    ``running`` while any job has yet to end (waiting, queued or running);
    once all have ended, ``succeeded`` when every one did, ``failed`` when
    any ended failed or dead, else ``cancelled``.
    """

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @classmethod
    def of(cls, counts: Mapping[JobState, int]) -> WorkflowStatus:
        """The status of a workflow whose jobs number ``counts`` in each state."""
        present = {state for state, count in counts.items() if count > 0}
        if not present <= FINISHED_STATES:
            return cls.RUNNING
        if present & {JobState.FAILED, JobState.DEAD}:
            return cls.FAILED
        # A workflow has a job from its submit until it is pruned with its last one.
        return cls.SUCCEEDED if present <= {JobState.SUCCEEDED} else cls.CANCELLED


class WorkflowInfo(msgspec.Struct, frozen=True):
    """A stored workflow, how many of its jobs are in each state, and so its status."""

    id: int
    name: str
    submitter: str
    created_at: float
    counts: dict[JobState, int]
    status: WorkflowStatus
    """``WorkflowStatus.of(counts)``: in the record, so that its JSON says it too."""


class JobEdge(msgspec.Struct, frozen=True):
    """One dependency: ``child_id`` runs after ``parent_id``.

    ``spawned``: instead, ``parent_id`` spawned ``child_id`` while it ran
    (``current_job().spawn``); the child was written with the parent's
    success and does not wait for it, unless it also names it in ``after``.
    """

    parent_id: int
    child_id: int
    spawned: bool = False


class JobBrief(msgspec.Struct, frozen=True, omit_defaults=True):
    """A job of a workflow, by id, and its state: what a drawing of a large workflow reads
    of every job (the rest only of those it draws). Encoded, ``submitted`` is written only
    when False: the jobs of a workflow's own submit are most of its jobs."""

    id: int
    state: JobState
    submitted: bool = True
    """Written by the workflow's own submit; False: spawned by one of its jobs, or joined
    later (submitted with ``after=`` one of its jobs)."""


class ParentResult(msgspec.Struct, frozen=True):
    """How one parent of a job ended, at its declared position (from 0)."""

    position: int
    job_id: int
    state: JobState
    result: Any = None
    error: dict[str, Any] | None = None


MAX_RELATIVES = 10_000
"""The most relatives a read lists on each side (``Client.relatives``' ``limit``, at most)."""


class Relatives(msgspec.Struct, frozen=True):
    """A job's parents and children, each as (id, state), parents in declared order.

    ``spawned_by``: the job that spawned this one while it ran, unless it is
    also a parent; ``spawned``: the jobs this one spawned that are not also
    its children, by id.
    """

    parents: tuple[tuple[int, JobState], ...]
    children: tuple[tuple[int, JobState], ...]
    spawned_by: tuple[int, JobState] | None = None
    spawned: tuple[tuple[int, JobState], ...] = ()


# -- live output ---------------------------------------------------------------------
#
# What a reader of a job's output is handed, piece by piece (``Client.output``).
# Positions are bytes of all that one run of an attempt wrote to stdout and stderr,
# dropped output included, so a reader resumes from ``end`` of the last piece it kept.
# An attempt has more than one run when workers hand its job back (a release, as a
# draining worker does): that uses no attempt, so the next run has the same number.


class OutputText(msgspec.Struct, frozen=True, tag="text"):
    """Output of an attempt: bytes ``start`` to ``end``, as text."""

    attempt: int
    start: int
    end: int
    text: str
    run: int = 1
    """Which run of the attempt wrote it, counted from 1 (more after hand-backs)."""


class OutputDropped(msgspec.Struct, frozen=True, tag="dropped"):
    """Output of an attempt that is not kept: bytes ``start`` to ``end``.

    The oldest output past the attempt's cap, or more than its worker sends
    in one write while the job prints fast.
    """

    attempt: int
    start: int
    end: int
    run: int = 1
    """Which run of the attempt wrote it, counted from 1 (more after hand-backs)."""

    @property
    def size(self) -> int:
        return self.end - self.start


class AttemptEnded(msgspec.Struct, frozen=True, tag="attempt_ended"):
    """An attempt is over and all its output was read; or, with ``attempt`` None, the job
    ended without one. ``job_state`` is its job's state then: a follow ends at a finished one."""

    attempt: int | None
    outcome: str | None
    error: dict[str, Any] | None
    job_state: JobState
    run: int = 1
    """Which run of the attempt is over, counted from 1 (more after hand-backs)."""


OutputEvent = OutputText | OutputDropped | AttemptEnded
