"""The one exception root of taskq and its families.

Each class carries its meaning in its docstring; drivers' errors are wrapped
once, at the edge that talks to them, with ``raise ... from exc``.
"""

from __future__ import annotations


class TaskqError(Exception):
    """Something went wrong in taskq."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(TaskqError):
    """The configuration (a file, a store URL or an environment variable) is invalid."""


class InvalidSetting(ConfigError, ValueError):
    """A setting was refused before anything was written (a queue's limit, a schedule's timing...).

    ``field`` names the member at fault where one is (``"max_running"``,
    ``"cron"``, ``"older_than"``...), so a form can point at it. A
    ConfigError, as these refusals were before they had a class of their
    own: code that catches ConfigError still catches them.
    """

    def __init__(self, message: str | None = None, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidJob(TaskqError, ValueError):
    """A job was refused before anything was written (bad payload, options or result).

    ``field`` names the option or part of the job at fault where one is
    (``"priority"``, ``"idempotency_key"``, ``"args"``...), so a form can
    point at it.
    """

    def __init__(self, message: str | None = None, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class IdempotencyConflict(InvalidJob):
    """The idempotency key already names a job with a different request; nothing was written.

    ``job_id`` is the job the key names. As payment APIs do, a key stands for
    one request: resubmitting the same request returns the same job, and a
    different request under the same key is refused rather than silently
    answered with the old job.
    """

    def __init__(self, message: str, *, job_id: int) -> None:
        super().__init__(message, field="idempotency_key")
        self.job_id = job_id


class UnknownFunction(InvalidJob):
    """No worker has declared the job named; nothing was written.

    ``suggestions`` are the declared names closest to it. A submit that
    opts out (``unchecked``) queues the name anyway, for workers yet to start.
    """

    def __init__(
        self, message: str, *, field: str | None = None, suggestions: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, field=field)
        self.suggestions = suggestions


class JobFailed(TaskqError):
    """The job ended without succeeding; ``job`` carries its state and error."""

    def __init__(self, message: str, *, job: object = None) -> None:
        super().__init__(message)
        self.job = job


class JobNotFound(TaskqError, LookupError):
    """No job has that id (it may have been pruned)."""


class AttemptNotFound(TaskqError, LookupError):
    """The job has no attempt of that number (none has started yet, or it never had that many)."""


class WorkflowNotFound(TaskqError, LookupError):
    """No workflow with that id."""


class QueueNotFound(TaskqError, LookupError):
    """No queue has that name: it has no jobs and no settings; nothing was written."""

    @classmethod
    def not_created(cls, queue: str, change: str, create: str) -> QueueNotFound:
        """The refusal to ``change`` (``"pause it"``) a queue that does not exist, not asked
        to be created; ``create`` says how to ask where the change was made (a flag, an
        argument, a member of a body)."""
        return cls(
            f"no queue named {queue!r}: it has no jobs and no settings; to {change} all the "
            f"same, ask to create it ({create})"
        )


class WorkerNotFound(TaskqError, LookupError):
    """No worker has that id: none registered with it, and no attempt names it."""


class NodeNotFound(TaskqError, LookupError):
    """The cluster has no member of that node id; nothing was changed."""


class MembershipRefused(TaskqError):
    """The cluster's membership cannot change that way (its last node); nothing was changed."""


class ScheduleNotFound(TaskqError, LookupError):
    """No schedule has that name; nothing changed."""


class ScheduleExists(TaskqError):
    """A schedule of that name exists with another definition; nothing was written."""

    @classmethod
    def taken(cls, name: str, replace: str) -> ScheduleExists:
        """The refusal of a schedule ``name`` names already; ``replace`` says how to ask to
        replace it where it was added (a flag, an argument, a member of a body)."""
        return cls(
            f"schedule {name!r} already exists; to replace it, ask to ({replace}), "
            "or remove it first"
        )


class WrongState(TaskqError):
    """The job, or every job of the workflow, is in a state this request does not apply to."""


class ResultTimeout(TaskqError, TimeoutError):
    """The job did not finish within the time the caller would wait."""


class RateLimited(TaskqError):
    """A submitter went over its submission rate; nothing was written.

    ``retry_after`` is how many seconds until the same request would fit
    (None when it never can: more jobs in one request than the limit allows).
    """

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotOverHttp(TaskqError):
    """The request needs the store itself: a client over ``taskq serve`` (HTTP) cannot make it.

    Open the client on the store's URL (``sqlite://``, ``rqlite://``) instead.
    """


class Unauthorized(TaskqError):
    """No valid bearer token came with the request."""

    @classmethod
    def tokenless(cls, how: str) -> Unauthorized:
        """The refusal of a request that came with no token, where the server wants one;
        ``how`` says how to send it from where the request was made (a header over HTTP,
        ``token=`` in Python)."""
        return cls(f"this server wants a token: {how}")


class Forbidden(TaskqError):
    """The token is valid, but its scopes do not allow this request."""


class BadRequest(TaskqError, ValueError):
    """The request is not well-formed: its JSON, a header or a query parameter."""


class TooLarge(TaskqError):
    """The request's body is larger than this server takes; nothing was written."""


class StoreError(TaskqError):
    """The job store could not carry out a request."""


class StoreUnavailable(StoreError):
    """The store cannot take the request now, and nothing was applied; it is safe to retry.

    Raised when no node is reachable, no leader is elected yet, or a local
    database stays locked past its busy timeout.
    """


class OutcomeUnknown(StoreError):
    """A write was sent but its outcome is unknown: it may or may not have been applied.

    Raised when the connection broke or timed out after the request was sent,
    or when the leader lost leadership while committing. Resending is only
    safe for writes that are idempotent by construction.
    """


class StoreAuthError(StoreError):
    """The store refused the credentials (or their absence)."""


class StorePermissionDenied(StoreError):
    """The credentials were accepted, but they do not permit this request (or the file's mode)."""


class StoreUnreachable(StoreUnavailable):
    """No node of the store accepts a connection: nothing listens at any of its addresses
    (a cluster not started, or a wrong URL). Safe to retry; a worker that never reached
    its store stops on it at start-up, where one running rides it out."""


class StoreFull(StoreUnavailable):
    """The store's disk is full; nothing was applied. Safe to retry once space is freed."""


class StoreReadOnly(StoreError):
    """The store can be read but not written (a read-only file, directory or mount)."""


class StoreCorrupt(StoreError):
    """The store's file is not a usable database (damaged, or not a taskq store)."""


class SchemaBehind(StoreError):
    """The store's schema is older than this taskq: a read-only command will not migrate it.

    Run any writing command (or ``taskq-worker``) once to bring it up to date.
    """


class StatementError(StoreError):
    """The store rejected a statement (syntax, constraint); the whole batch was rolled back."""

    def __init__(self, message: str, *, index: int = 0, sql: str = "") -> None:
        super().__init__(message)
        self.index = index
        self.sql = sql


class ConstraintViolation(StatementError):
    """A statement broke a constraint (UNIQUE, NOT NULL, CHECK, FOREIGN KEY)."""


class MigrationError(StoreError):
    """The store's schema could not be brought up to date."""


class SchemaNewer(MigrationError):
    """The store's schema is newer than this taskq knows; nothing was written. Upgrade taskq."""


class BackupInvalid(TaskqError):
    """A file given as a backup is not a taskq store this taskq can restore; nothing was written."""


class StoreNotEmpty(TaskqError):
    """A restore was asked into a store that already holds data; nothing was written."""
