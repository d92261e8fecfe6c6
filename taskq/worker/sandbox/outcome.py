"""What running one payload came to: the status, the result or error, and what it used."""

from __future__ import annotations

import enum
from typing import TypedDict

import msgspec

from taskq import fast_json
from taskq.broker.records import WorkflowSubmission
from taskq.job_context import NamedStep
from taskq.worker.sandbox.json_value import JsonValue


class Status(enum.StrEnum):
    """How a job ended; every status but ``succeeded`` carries an ``error``."""

    SUCCEEDED = "succeeded"
    ERROR = "error"
    """The payload raised (or a shell command exited non-zero)."""
    TIMEOUT = "timeout"
    """The wall-clock limit passed; the parent killed the process group."""
    MEMORY = "memory"
    """The address-space limit was hit (see ``judging`` for the heuristic)."""
    CPU = "cpu"
    """The CPU-seconds limit was hit (SIGXCPU, or SIGKILL at the hard limit)."""
    CRASHED = "crashed"
    """The process died by a signal or exited without reporting a result."""
    OUTPUT_LIMIT = "output_limit"
    """The job wrote more than ``Limits.output_bytes`` to stdout+stderr."""
    RESULT_INVALID = "result_invalid"
    """The return value is not JSON or is larger than ``Limits.result_bytes``."""
    CANCELLED = "cancelled"
    """The caller cancelled the job (e.g. its lease was lost)."""
    LEASE_EXPIRED = "lease_expired"
    """The lease could not be renewed in time (worker frozen or cut off); killed first."""
    POLICY = "policy"
    """The worker is not configured to run this payload; nothing was run."""


class ErrorInfo(TypedDict):
    """Why a job did not succeed: an exception's class, message and traceback, or ours.

    ``type`` is the exception class (qualified unless a builtin), the key the
    broker's client reads.
    """

    type: str
    message: str
    traceback: str


class Outcome(msgspec.Struct, frozen=True):
    """Everything the worker reports about one attempt.

    ``result_json`` is a successful job's return value as its child encoded
    it: the worker hands that text to the store as it is.
    ``exit_code`` and ``signal`` describe how the job's process ended, and stay
    ``None`` while it lives on (a pool child after a clean job).
    ``peak_rss_bytes`` and ``cpu_seconds`` cover the job's process and the
    children it waited for.
    """

    status: Status
    result_json: str | None = None
    error: ErrorInfo | None = None
    exit_code: int | None = None
    signal: int | None = None
    peak_rss_bytes: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    log_tail: str = ""
    lineage: tuple[str, ...] = ()
    """The class and bases, by name, of the exception the job raised (for ``retry_on``)."""
    retry_after: float | None = None
    """The wait the job asked for with ``taskq.Retry(after=...)``."""
    give_up: str = ""
    """``abort`` (``taskq.Abort``) or ``permanent`` (it cannot run as asked): no retry."""
    spawn: WorkflowSubmission | None = None
    """The jobs a successful job spawned into its workflow, to write with its result."""
    spawn_by_name: tuple[NamedStep, ...] = ()
    """Which of them it gave by name: the worker resolves them before its report is made."""

    @property
    def result(self) -> JsonValue:
        """The return value, decoded (``None`` when there is none)."""
        return None if self.result_json is None else fast_json.loads(self.result_json)


def error_info(type_name: str, message: str, traceback: str = "") -> ErrorInfo:
    """An ``ErrorInfo`` for a failure the sandbox itself describes."""
    return {"type": type_name, "message": message, "traceback": traceback}


def refused_outcome(reason: str) -> Outcome:
    """The outcome of a payload the worker's policy refuses (see ``Policy.refusal``)."""
    return Outcome(Status.POLICY, error=error_info("PolicyRefused", f"{reason}; nothing was run"))


def stopped_before_start() -> Outcome:
    """The outcome of a job stopped before it ran: nothing to report but that."""
    return Outcome(Status.CANCELLED, error=error_info("Cancelled", "stopped before it ran"))


def lease_expired_before_start() -> Outcome:
    """The outcome of a job whose lease ran out before it could start."""
    return Outcome(
        Status.LEASE_EXPIRED,
        error=error_info("LeaseExpired", "its lease could not be renewed in time; never started"),
    )
