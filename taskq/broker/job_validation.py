"""The one check of a job request, made before anything is written.

Every way in reaches it through ``ops.enqueue.checked_row``: the Python
client, ``taskq submit`` and ``taskq schedule add``, and the console's submit
form. Types are exact, because a near miss would otherwise be taken wrongly
rather than refused: a bool is not a number (``timeout=True`` would be one
second), a string is not a list of labels (``"gpu"`` would need the labels g,
p and u, and no worker has them), a float is not a whole number
(``priority=1.5`` would be cut to 1). Each refusal is a
:class:`taskq.errors.InvalidJob` naming the field.

The bounds: priority and max_attempts are 32-bit integers (priority from
-2**31 to 2**31-1, max_attempts from 1); names (queue, labels, idempotency
key, submitter) are at most 255 characters, without NUL (SQLite would cut a
key at one, and two keys would collide); a payload nests at most 256 deep.
``run_at`` is a time from 1970 to the end of 9999 (UTC), what a date can
show; ``delay``, ``timeout`` and the ``wall_seconds`` limit are at most
:data:`MAX_SECONDS`. Each limit is at most what a worker could set
(:data:`LIMITS`): a value past it could never be honoured, and one
past a 64-bit integer is more than SQLite or setrlimit hold.
"""

from __future__ import annotations

import enum
import json
import math
import reprlib
from collections.abc import Sequence
from typing import Any, TypeVar

import orjson

from taskq import errors
from taskq.bounds import Bounds, Text
from taskq.broker import limits as job_limits
from taskq.broker.records import (
    JobSpec,
    JobState,
    PayloadKind,
    WorkflowStatus,
    WorkflowSubmission,
)
from taskq.retry import parse_retry

MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
MAX_ATTEMPTS = 2**31 - 1
MAX_NAME_CHARS = 255
MAX_DEPTH = 256
"""How deep a payload may nest: well within what every JSON reader of taskq reads back."""
MAX_RUN_AT = 253_402_300_799
"""The latest a job may be due: the last second of the year 9999 (UTC), the latest a date shows."""
MAX_SECONDS = 1000 * 365 * 86_400
"""The longest ``delay``, ``timeout`` or ``wall_seconds``, 1,000 years: past anything a job
waits or runs, and a delayed job's time stays a date (before the year 9999) for millennia."""
_INT64 = 2**63 - 1
_LIMIT_CEILINGS: dict[str, float] = {
    "memory_bytes": _INT64,
    "cpu_seconds": _INT64,
    "wall_seconds": MAX_SECONDS,
    # A descriptor is a C int: no kernel lets a process hold more (Linux's
    # fs.nr_open, the ceiling of a hard RLIMIT_NOFILE, stops below it).
    "open_files": 2**31 - 1,
    "log_tail_bytes": _INT64,
    "output_bytes": _INT64,
    "result_bytes": _INT64,
    # Linux's PID_MAX_LIMIT: there are no more process ids, and a cgroup's pids.max takes no more.
    "processes": 4 * 1024 * 1024,
}
LIMITS: dict[str, Bounds] = {
    name: Bounds(0, most, low_excluded=True) for name, most in _LIMIT_CEILINGS.items()
}
"""Each limit above 0 and at most what setrlimit, a cgroup and SQLite's 64-bit integers can
hold (a size counted in bytes, its unit applied); how each is written: ``limits.FORMS``."""

# The bounds of a job's values, each declared once: the checks below hold a job to
# them, and the HTTP API's schema states them (taskq.broker.client.job_options).
PRIORITY = Bounds(MIN_PRIORITY, MAX_PRIORITY)
ATTEMPTS = Bounds(1, MAX_ATTEMPTS)
DELAY = Bounds(0, MAX_SECONDS)
TIMEOUT = Bounds(0, MAX_SECONDS, low_excluded=True)
RUN_AT = Bounds(0, MAX_RUN_AT)
NAME = Text(1, MAX_NAME_CHARS, r"^[^\u0000]*$")
"""A queue, a label, an idempotency key: SQLite would cut a key at a NUL, and two keys collide."""
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
TARGET = Text(pattern=rf"^{_IDENTIFIER}:{_IDENTIFIER}$")
"""``pkg.mod:func`` or ``pkg.mod:Class.method``, as the worker reads a target (ASCII names)."""
PARENT_POSITION = Bounds(0)
"""A parent named by its position in the workflow submitted with it (below the jobs' count)."""
# A queue's settings (taskq.broker.ops.queues): a rate of 0 would be a pause, which
# pausing says better; no limit at all is null.
MAX_RUNNING = Bounds(0, 2**31 - 1)
RATE_LIMIT = Bounds(0, low_excluded=True)
RATE_PERIOD = Bounds(0, low_excluded=True)
# A submitter's limit (taskq.broker.ops.queues): at most a rate of submissions a period.
SUBMIT_RATE = Bounds(0, low_excluded=True)
SUBMIT_PERIOD = Bounds(0, low_excluded=True)
PAGE = Bounds(1, 1000)
"""How many jobs one listing returns at most (``limit``), on the store as over HTTP."""
_CALL_FIELDS = ("target", "args", "kwargs")
# What JSON nests; a tuple, not a union, because isinstance takes it faster.
_CONTAINERS = (list, tuple, dict)
# Built once, as the operations' encoder is: sorted keys make equal requests equal text.
_CANONICAL_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"), sort_keys=True)


def check_spec(spec: JobSpec) -> None:
    """Refuse ``spec`` with InvalidJob naming its first wrong field; return when it is sound.

    The payload's JSON encoding and size are checked by the caller, which
    encodes it anyway.
    """
    if not isinstance(spec, JobSpec):
        raise errors.InvalidJob(
            f"a job must be a JobSpec (build it with taskq.call_spec), got {_shown(spec)}"
        )
    try:
        kind = PayloadKind(spec.kind)
    except ValueError:
        raise errors.InvalidJob(
            f"kind must be one of {', '.join(PayloadKind)}, got {_shown(spec.kind)}", field="kind"
        ) from None
    check_name(spec.queue, "queue")
    _whole_number(spec.priority, "priority", PRIORITY)
    if spec.max_attempts is not None:
        _whole_number(spec.max_attempts, "max_attempts", ATTEMPTS)
    _seconds(spec.delay, "delay", DELAY)
    if spec.run_at is not None:
        run_at = _number(spec.run_at, "run_at", "a unix time")
        if not RUN_AT.admits(run_at):
            raise errors.InvalidJob(
                f"run_at must be a unix time from 0 to {MAX_RUN_AT} (1970 to the end of 9999, "
                f"UTC), got {spec.run_at}",
                field="run_at",
            )
    if spec.timeout is not None:
        _seconds(spec.timeout, "timeout", TIMEOUT)
    _labels(spec.labels)
    _limits(spec.limits)
    if spec.idempotency_key is not None:
        check_name(spec.idempotency_key, "idempotency_key")
    check_name(spec.submitter, "submitter", empty_allowed=True)
    if spec.retry is not None:
        parse_retry(spec.retry)
    check_parents(spec.after, "after")
    if not isinstance(spec.run_anyway, bool):
        raise errors.InvalidJob(
            f"run_anyway must be True or False, got {_shown(spec.run_anyway)}", field="run_anyway"
        )
    _payload(kind, spec.payload)


def check_name(value: object, field: str, *, empty_allowed: bool = False) -> None:
    """Refuse anything but a string of at most 255 characters that SQLite keeps whole."""
    if not isinstance(value, str):
        raise errors.InvalidJob(f"{field} must be a string, got {_shown(value)}", field=field)
    if not value and not empty_allowed:
        raise errors.InvalidJob(f"{field} must not be empty", field=field)
    if len(value) > MAX_NAME_CHARS:
        raise errors.InvalidJob(
            f"{field} is {len(value)} characters long, over the limit of {MAX_NAME_CHARS}",
            field=field,
        )
    # NAME.admits, whose length this function has checked already: no NUL.
    if "\x00" in value:
        raise errors.InvalidJob(
            f"{field} must not hold a NUL character, got {value!r}", field=field
        )
    _unicode(value, field)


def check_page_limit(limit: object) -> None:
    """Refuse a listing's ``limit`` that is not a whole number within :data:`PAGE`."""
    _whole_number(limit, "limit", PAGE)


def check_target(target: object) -> None:
    """Refuse a call target that is not "package.module:function" (or "...:Class.method")."""
    if not isinstance(target, str) or not TARGET.admits(target):
        raise errors.InvalidJob(
            f"target must look like 'package.module:function', got {_shown(target)}"
            + _colon_hint(target),
            field="target",
        )


def dotted_meaning(target: object) -> str | None:
    """The target meant, most likely, when a dot stands for the colon (``lab.slow`` for
    ``lab:slow``), as Celery's and RQ's dotted paths are written; else None."""
    if not isinstance(target, str) or ":" in target or "." not in target:
        return None
    module, _, function = target.rpartition(".")
    meant = f"{module}:{function}"
    return meant if TARGET.admits(meant) else None


def _colon_hint(target: object) -> str:
    meant = dotted_meaning(target)
    return "" if meant is None else f"; did you mean {meant!r}?"


def fingerprint(spec: JobSpec) -> str:
    """What an idempotency key stands for: a digest of the request, one-off fields left out.

    When to run (``run_at``, ``delay``) and who asked (``submitter``) may
    differ between a request and its resend; everything that makes the job
    what it is may not. Only for a ``spec`` that ``check_spec`` accepted.
    """
    request: dict[str, Any] = {
        "kind": PayloadKind(spec.kind).value,
        "payload": spec.payload,
        "queue": spec.queue,
        "priority": spec.priority,
        "max_attempts": spec.max_attempts,
        "timeout": None if spec.timeout is None else float(spec.timeout),
        "limits": spec.limits,
        "labels": sorted(set(spec.labels)),
    }
    if spec.retry is not None:
        # Left out when absent, so that a job's fingerprint from before policies stays the same.
        request["retry"] = parse_retry(spec.retry).to_dict()
    # Left out when absent too, for the fingerprints from before workflows.
    if spec.after:
        request["after"] = list(spec.after)
    if spec.run_anyway:
        request["run_anyway"] = True
    # Imported here, not with the module: hashlib loads OpenSSL (3 ms), and only
    # a job with an idempotency key is fingerprinted.
    import hashlib

    return hashlib.sha256(_CANONICAL_JSON.encode(request).encode()).hexdigest()


def workflow_fingerprint(submission: WorkflowSubmission) -> str:
    """What a workflow's idempotency key stands for: its name, its jobs and their parents.

    Only for a submission whose every job ``check_spec`` accepted.
    """
    request = {
        "name": submission.name,
        "workflow_id": submission.workflow_id,
        "jobs": [fingerprint(spec) for spec in submission.jobs],
        "parents": [list(positions) for positions in submission.parents],
    }
    import hashlib  # as in fingerprint

    return hashlib.sha256(_CANONICAL_JSON.encode(request).encode()).hexdigest()


def check_parents(value: object, what: str) -> None:
    """Refuse parents that are not whole numbers, or that name one job twice."""
    # A tuple or a list, the usual, skips the abstract Sequence check and its cost.
    if not isinstance(value, tuple | list) and (
        isinstance(value, str | bytes) or not isinstance(value, Sequence)
    ):
        raise errors.InvalidJob(
            f"{what} must be a list of job ids, got {_shown(value)}", field="after"
        )
    for parent in value:
        if isinstance(parent, bool) or not isinstance(parent, int):
            raise errors.InvalidJob(
                f"{what}: each parent must be a whole number, got {_shown(parent)}", field="after"
            )
    if len(set(value)) != len(value):
        twice = sorted({parent for parent in value if value.count(parent) > 1})
        named = ", ".join(f"job {parent}" for parent in twice)
        raise errors.InvalidJob(f"{what}: {named} given more than once", field="after")


def check_keys_within(keys_and_fingerprints: list[tuple[str, str | None]]) -> None:
    """Refuse one request that gives the same idempotency key to two different jobs."""
    seen: dict[str, str | None] = {}
    for key, digest in keys_and_fingerprints:
        if seen.setdefault(key, digest) != digest:
            raise errors.InvalidJob(
                f"idempotency key {key!r} is given twice in one request, to two different jobs",
                field="idempotency_key",
            )


def parse_job_state(value: object) -> JobState:
    """A job state given by name (``"succeeded"``) or as a JobState (which is its name)."""
    return _one_of(JobState, value, "job state", "states", "state")


def parse_workflow_status(value: object) -> WorkflowStatus:
    """A workflow status given by name (``"running"``) or as a WorkflowStatus."""
    return _one_of(WorkflowStatus, value, "workflow status", "statuses", "status")


_Named = TypeVar("_Named", bound=enum.StrEnum)


def _one_of(kind: type[_Named], value: object, noun: str, plural: str, field: str) -> _Named:
    """The member of ``kind`` that ``value`` names; else one error naming them all."""
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass  # refused below, with the members to choose from
    raise errors.InvalidJob(
        f"no {noun} {_shown(value)}; the {plural} are {', '.join(kind)}", field=field
    )


def _shown(value: object) -> str:
    # reprlib stops after a few levels and items: a refused value may be huge or deep.
    return reprlib.repr(value)


def _unicode(value: str, field: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError:
        raise errors.InvalidJob(
            f"{field} must be valid Unicode, got {value!r} (a lone surrogate)", field=field
        ) from None


def _whole_number(value: object, field: str, bounds: Bounds) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidJob(f"{field} must be a whole number, got {_shown(value)}", field=field)
    if not bounds.admits(value):
        raise errors.InvalidJob(
            f"{field} must be from {bounds.low:.0f} to {bounds.high:.0f}, got {value}", field=field
        )


def _number(value: object, field: str, meaning: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.InvalidJob(
            f"{field} must be {meaning} (a number), got {_shown(value)}", field=field
        )
    try:
        number = float(value)
    except OverflowError:
        raise errors.InvalidJob(f"{field} is too large, got {value}", field=field) from None
    if not math.isfinite(number):
        raise errors.InvalidJob(f"{field} must be finite, got {value}", field=field)
    return number


def _seconds(value: object, field: str, bounds: Bounds) -> None:
    seconds = _number(value, field, "seconds")
    if not bounds.admits(seconds):
        if seconds > bounds.low:
            raise errors.InvalidJob(
                f"{field} must be at most {MAX_SECONDS} seconds (1,000 years), got {value}",
                field=field,
            )
        bound = "more than zero" if bounds.low_excluded else "zero or more"
        raise errors.InvalidJob(f"{field} must be {bound} seconds, got {value}", field=field)


def _labels(value: object) -> None:
    if isinstance(value, str):
        raise errors.InvalidJob(
            f"labels must be a list of strings, got the string {value!r}: "
            f"for one label write [{value!r}]",
            field="labels",
        )
    if not isinstance(value, list | tuple | set | frozenset):
        raise errors.InvalidJob(
            f"labels must be a list of strings, got {_shown(value)}", field="labels"
        )
    for label in value:
        check_name(label, "labels")


def _limits(value: object) -> None:
    if not isinstance(value, dict):
        raise errors.InvalidJob(
            f"limits must be a dict such as {{'memory_bytes': '512MiB'}}, got {_shown(value)}",
            field="limits",
        )
    for name in value:
        if not isinstance(name, str):
            raise errors.InvalidJob(
                f"limits: each name must be a string, got {_shown(name)}", field="limits"
            )
    if not value:
        return  # the worker's defaults: nothing to parse (the common case, kept cheap)
    try:
        parsed = job_limits.parse_limits(value).to_dict()
    except job_limits.LimitsInvalid as exc:
        raise errors.InvalidJob(f"limits: {exc}", field="limits") from exc
    for name in value:
        # Above 0 already: Limits refuses the rest.
        if not LIMITS[name].admits(parsed[name]):
            raise errors.InvalidJob(
                f"limits: {name} must be at most {LIMITS[name].high}, got {value[name]}",
                field="limits",
            )


def _payload(kind: PayloadKind, payload: object) -> None:
    if not isinstance(payload, dict):
        raise errors.InvalidJob(
            f"the payload must be a dict, got {_shown(payload)}", field="payload"
        )
    _json_tree(payload, "the payload")
    if kind is not PayloadKind.CALL:
        return  # the worker checks the fields of code and commands, which it alone runs
    unknown = sorted(set(payload) - set(_CALL_FIELDS))
    if unknown:
        raise errors.InvalidJob(f"a call has no field(s) {', '.join(unknown)}", field="payload")
    check_target(payload.get("target"))
    if not isinstance(payload.get("args"), list):
        raise errors.InvalidJob(
            f"args must be a list of the call's arguments, got {_shown(payload.get('args'))}",
            field="args",
        )
    if not isinstance(payload.get("kwargs"), dict):
        raise errors.InvalidJob(
            f"kwargs must be a dict of keyword arguments, got {_shown(payload.get('kwargs'))}",
            field="kwargs",
        )


def _json_tree(value: object, what: str) -> None:
    """Refuse what JSON would change (keys that are not strings) or choke on (deep nesting).

    Walked with a stack of its own, so that no depth runs out Python's; only
    containers go on it. The encoder judges the rest (types, NaN) when it
    writes the value.
    """
    try:
        # A tenth of the walk's cost, for every job: orjson refuses keys that are
        # not strings and nesting past 254 levels (less than MAX_DEPTH), so what
        # it writes needs no walk.
        orjson.dumps(value)
        return
    except orjson.JSONEncodeError:
        pass  # that, or a long integer, a lone surrogate, an unknown type: walk
    pending: list[tuple[list[Any] | tuple[Any, ...] | dict[Any, Any], int]] = []
    if isinstance(value, _CONTAINERS):
        pending.append((value, 1))
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise errors.InvalidJob(
                f"{what} is nested more than {MAX_DEPTH} levels deep", field="payload"
            )
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, str):
                    raise errors.InvalidJob(
                        f"{what}: dict keys must be strings, got {_shown(key)} "
                        "(JSON would turn it into one)",
                        field="payload",
                    )
            children: Any = node.values()
        else:
            children = node
        pending.extend((child, depth + 1) for child in children if isinstance(child, _CONTAINERS))
