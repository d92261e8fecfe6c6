"""The broker's shared types: job states and the records operations return.

A leaf module: it imports nothing else of taskq, so every layer can use it.
Every record is a msgspec Struct (frozen where it is a value): as immutable
as a frozen dataclass, several times faster to build, and one kind of thing
for every reader (``taskq --json`` among them).
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any

import msgspec


class JobState(enum.StrEnum):
    """Where a job is in its life, and which operation moves it on.

    ============  ==========================================================
    state         left by
    ============  ==========================================================
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
    cancelled     ``job_retry`` by hand (queued); ``job_prune``
    ============  ==========================================================
    """

    QUEUED = "queued"
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
    in between. Before the report, ``started_at`` is the claim."""


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
    error: dict[str, Any] | None
    claimed_at: float | None = None
    """When the attempt was claimed; ``started_at`` is when its code started
    (the claim, until the attempt reports), ``finished_at`` when it ended."""


class AttemptReport(msgspec.Struct, frozen=True):
    """How an attempt went, as the worker measured it (all optional)."""

    outcome: str
    exit_code: int | None = None
    signal: int | None = None
    peak_rss_bytes: int | None = None
    cpu_seconds: float | None = None
    log_tail: str | None = None
    waited_seconds: float | None = None
    """From the claim to the start of the job's code: a job claimed ahead waits for a slot."""
    ran_seconds: float | None = None
    """From the start of the job's code to its end. Both are the worker's own
    measures of time spans; the store places them after its own claim time."""


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
