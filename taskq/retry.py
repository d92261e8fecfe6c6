"""How a failed job is tried again: the retry policy, and what job code raises to steer it.

A leaf module (it imports only ``taskq.errors`` and ``taskq.bounds``): job code imports
``taskq.Retry`` and ``taskq.Abort`` in the sandbox's child, the broker stores
a :class:`RetryPolicy` with each job, and the worker applies it.

Exception types travel in the store by qualified name (``"builtins"`` left
out, as tracebacks print them): ``retry_on=(ConnectionError,)`` is kept as
``("ConnectionError",)`` and matches any exception whose class has that
name among its bases, so ``ConnectionResetError`` is retried too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from taskq import errors
from taskq.bounds import Bounds, Text

MAX_DELAY_SECONDS = 365 * 86400.0
"""The longest wait a policy or a ``Retry(after=...)`` may ask for: a year."""

# A policy's bounds, declared once: RetryPolicy holds its fields to them, and the HTTP
# API's schema of a job's retry states them (taskq.broker.client.option_schemas).
POLICY_BOUNDS: dict[str, Bounds] = {
    "base": Bounds(0.0, MAX_DELAY_SECONDS),
    "factor": Bounds(1.0, 1000.0),
    "cap": Bounds(0.0, MAX_DELAY_SECONDS),
    "jitter": Bounds(0.0, 1.0),
}
EXCEPTION_NAME = Text(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
"""An exception class by name, "ValueError" or "package.module.Error" (ASCII names, as a
job's target: Python's \\w and JSON Schema's would read other letters differently)."""


class Retry(Exception):
    """Raised by job code: try this job again ``after`` seconds from now.

    ``after=None`` waits as the job's retry policy says. The attempt counts:
    a job out of attempts ends ``dead``.
    """

    def __init__(self, after: float | None = None, message: str = "") -> None:
        # Checked here, in the job's code, so that the job's error says what was meant;
        # math.isfinite alone would answer "must be real number, not str".
        if after is not None and (isinstance(after, bool) or not isinstance(after, int | float)):
            raise TypeError(
                f"Retry(after=...) takes seconds as a number (after=600 for ten minutes), "
                f"got {after!r}"
            )
        if after is not None and not (0 <= after <= MAX_DELAY_SECONDS and math.isfinite(after)):
            raise ValueError(f"Retry(after=...) must be 0 to {MAX_DELAY_SECONDS:g} s, got {after}")
        super().__init__(message or (f"retry in {after:g} s" if after is not None else "retry"))
        self.after = after


class Abort(Exception):
    """Raised by job code: give this job up now, whatever attempts are left; it ends ``dead``."""

    def __init__(self, reason: str = "aborted by the job") -> None:
        super().__init__(reason)
        self.reason = reason


def exception_name(cls: type[BaseException]) -> str:
    """The name an exception class travels by: ``module.Qualname``, builtins bare."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def exception_lineage(cls: type[BaseException]) -> tuple[str, ...]:
    """The names of ``cls`` and every exception class it derives from, nearest first."""
    return tuple(
        exception_name(base)
        for base in cls.__mro__
        if isinstance(base, type) and issubclass(base, BaseException)
    )


def _names(value: Iterable[str | type[BaseException]], field: str) -> tuple[str, ...]:
    if isinstance(value, str | type):
        value = (value,)  # one type or name given alone: taken as the one it means
    if isinstance(value, Mapping):  # its keys would pass for names
        raise errors.InvalidJob(
            f"retry: {field} takes a list of exception classes or names, got {value!r}",
            field="retry",
        )
    names = []
    for item in value:
        if isinstance(item, type) and issubclass(item, BaseException):
            names.append(exception_name(item))
        elif isinstance(item, str) and EXCEPTION_NAME.admits(item):
            names.append(item)
        else:
            raise errors.InvalidJob(
                f"retry: {field} takes exception classes or their qualified names, got {item!r}",
                field="retry",
            )
    return tuple(names)


def _check_number(field: str, value: object, bounds: Bounds) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.InvalidJob(f"retry: {field} must be a number, got {value}", field="retry")
    try:
        number = float(value)
    except OverflowError:  # a whole number past any float's range
        number = math.inf
    if not (math.isfinite(number) and bounds.admits(number)):
        raise errors.InvalidJob(
            f"retry: {field} must be from {bounds.low:g} to {bounds.high:g}, got {value}",
            field="retry",
        )


class RetryPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When and whether a failed job runs again.

    The wait before attempt ``n + 1`` is ``min(cap, base * factor**(n-1))``
    seconds, times a random factor within ``1 ± jitter`` (so that jobs that
    failed together do not come back together). An exception is retried
    unless its class (or a base) is named in ``dont_retry_on``, and, when
    ``retry_on`` is given, only if named there; others end the job
    ``failed`` after that attempt. Timeouts, crashes and running out of
    memory are retried whatever the lists say: they are not exceptions of
    the job's. ``retry_on`` and ``dont_retry_on`` take exception classes or
    their qualified names (``"requests.exceptions.Timeout"``).
    """

    base: float = 1.0
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.25
    retry_on: tuple[str | type[BaseException], ...] = ()
    dont_retry_on: tuple[str | type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        for field, bounds in POLICY_BOUNDS.items():
            _check_number(field, getattr(self, field), bounds)
        # Classes are kept by name: that is how they travel in the store.
        msgspec.structs.force_setattr(self, "retry_on", _names(self.retry_on, "retry_on"))
        msgspec.structs.force_setattr(
            self, "dont_retry_on", _names(self.dont_retry_on, "dont_retry_on")
        )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1 for the first), jitter applied."""
        try:
            wait = min(self.cap, self.base * self.factor ** max(0, attempt - 1))
        except OverflowError:  # long past any cap
            wait = self.cap
        import random  # Imported here, not with the module: only a failed attempt is delayed

        return max(0.0, wait * (1.0 + random.uniform(-self.jitter, self.jitter)))

    def retries(self, lineage: Iterable[str]) -> bool:
        """Whether an exception of these class names (its class and bases) is worth a retry."""
        names = set(lineage)
        if names.intersection(self.dont_retry_on):
            return False
        return not self.retry_on or bool(names.intersection(self.retry_on))

    def to_dict(self) -> dict[str, Any]:
        """The policy as the JSON object the store keeps."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


DEFAULT_RETRY = RetryPolicy()
"""The policy of a job that names none, in a queue that names none."""


def parse_retry(value: object) -> RetryPolicy:
    """A retry policy given as a RetryPolicy or its JSON object; InvalidJob naming what is wrong."""
    if isinstance(value, RetryPolicy):
        return value
    if not isinstance(value, Mapping):
        raise errors.InvalidJob(
            f"retry must be a taskq.RetryPolicy or a dict of its fields, got {value!r}",
            field="retry",
        )
    unknown = sorted(set(value) - set(RetryPolicy.__struct_fields__), key=str)
    if unknown:
        import difflib  # Imported here, not with the module: only a refusal needs it

        fields = RetryPolicy.__struct_fields__
        meant = [
            close for name in unknown for close in difflib.get_close_matches(str(name), fields, 1)
        ]
        suggestion = f" (did you mean {', '.join(meant)}?)" if meant else ""
        raise errors.InvalidJob(
            f"retry has no field(s) {', '.join(map(str, unknown))}{suggestion}; its fields are "
            f"{', '.join(fields)}",
            field="retry",
        )
    try:
        return RetryPolicy(**value)
    except TypeError as exc:
        raise errors.InvalidJob(f"retry: {exc}", field="retry") from exc
