"""A result's spawn as a child sends it: the jobs its job spawned, and which it gave by name.

Only a success carries a spawn, into its own job's workflow (no
``workflow_id`` of its own). Its steps by name (``spawn_by_name``, a list
of :class:`taskq.job_context.NamedStep`) each point at a call job of the
spawn and name options it has: the worker resolves them from those jobs
(``taskq.worker.spawn_names``). A child runs code the worker does not
trust, so anything else is a :class:`~taskq.worker.sandbox.protocol.ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from taskq import errors
from taskq.broker.records import JobSpec, PayloadKind, WorkflowSubmission
from taskq.job_context import MAX_SPAWN_JOBS, NamedStep

# What a step by name may have been given: the job's fields, and its call's keywords.
_STEP_OPTIONS = (frozenset(JobSpec.__struct_fields__) - {"kind", "payload"}) | {"kwargs"}


class MalformedSpawn(errors.TaskqError):
    """A result's spawn that no job could have sent."""


def parse_spawn(
    message: Mapping[str, Any], succeeded: bool
) -> tuple[WorkflowSubmission | None, tuple[NamedStep, ...]]:
    """The spawn of a ``result`` message and its steps by name; ``MalformedSpawn`` if bad."""
    spawn = message.get("spawn")
    by_name = message.get("spawn_by_name")
    if spawn is None:
        if by_name is not None:
            raise MalformedSpawn("result has steps by name but no spawn")
        return None, ()
    try:
        submission = msgspec.convert(spawn, WorkflowSubmission)
        steps = msgspec.convert(by_name or [], tuple[NamedStep, ...])
    except msgspec.ValidationError as exc:
        raise MalformedSpawn(f"result has a malformed spawn: {exc}") from exc
    if (
        not succeeded
        or submission.workflow_id is not None
        or not 0 < len(submission.jobs) <= MAX_SPAWN_JOBS
    ):
        raise MalformedSpawn("result has a spawn no job could send")
    if len({step.position for step in steps}) < len(steps) or not all(
        _names_a_call(submission, step) for step in steps
    ):
        raise MalformedSpawn("result has a spawn's step by name that is no call of it")
    return submission, steps


def _names_a_call(submission: WorkflowSubmission, step: NamedStep) -> bool:
    """Whether ``step`` points at a call job of the spawn, with options it may have."""
    if not 0 <= step.position < len(submission.jobs) or not set(step.options) <= _STEP_OPTIONS:
        return False
    job = submission.jobs[step.position]
    payload = job.payload
    return (
        job.kind is PayloadKind.CALL
        and isinstance(payload.get("target"), str)
        and isinstance(payload.get("args"), list)
        and isinstance(payload.get("kwargs"), dict)
    )
