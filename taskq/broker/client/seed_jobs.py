"""Jobs written as JSON in the seed design's format, as a file or a request body carries them.

```json
{"task_id": "wc-1", "task_type": "python_exec",
 "payload": {"code": "def count_words(text): return len(text.split())",
             "function": "count_words", "args": ["hello world"]},
 "status": "pending"}
```

``task_type`` is one of the payload kinds: ``python_exec`` (``code``,
``function``, ``args``, ``kwargs``), ``shell`` (``command``, a string run by
``/bin/sh -c``, or ``argv``, a list; ``cwd``, ``env``) or ``call``
(``target``, ``args``, ``kwargs``). ``task_id``, when given, is the job's
idempotency key: submitting the same document twice makes one job.
``status`` may only say ``pending``: a new job is queued. A document is one
job or a list of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from taskq import errors
from taskq.broker.client.declarations import batch_entry
from taskq.broker.client.specs import call_spec, python_exec_spec, shell_spec
from taskq.broker.records import JobSpec

_JOB_FIELDS = {"task_id", "task_type", "payload", "status"}


def _python_exec(payload: dict[str, Any], options: dict[str, Any]) -> JobSpec:
    return python_exec_spec(
        payload.get("code", ""),
        payload.get("function", ""),
        payload.get("args", []),
        payload.get("kwargs"),
        **options,
    )


def _shell(payload: dict[str, Any], options: dict[str, Any]) -> JobSpec:
    if ("command" in payload) == ("argv" in payload):
        raise errors.InvalidJob(
            "shell: give the command as command (a string for /bin/sh -c) or argv (a list), "
            "one of them",
            field="payload",
        )
    command = payload["command"] if "command" in payload else payload["argv"]
    return shell_spec(command, cwd=payload.get("cwd"), env=payload.get("env"), **options)


def _call(payload: dict[str, Any], options: dict[str, Any]) -> JobSpec:
    return call_spec(
        payload.get("target", ""), payload.get("args", []), payload.get("kwargs"), **options
    )


_KINDS: dict[str, tuple[frozenset[str], Callable[[dict[str, Any], dict[str, Any]], JobSpec]]] = {
    "python_exec": (frozenset({"code", "function", "args", "kwargs"}), _python_exec),
    "shell": (frozenset({"command", "argv", "cwd", "env"}), _shell),
    "call": (frozenset({"target", "args", "kwargs"}), _call),
}


def seed_job_specs(document: object, **options: Any) -> list[JobSpec]:
    """The jobs a seed-format document describes, each with ``options`` (those of ``call_spec``).

    A malformed document is :class:`taskq.errors.InvalidJob`, naming the job
    (by its place in a list) and the field at fault.
    """
    if isinstance(document, list):
        if not document:
            raise errors.InvalidJob("the list of jobs is empty", field="payload")
        return [_one(job, options, f"{batch_entry(index)}: ") for index, job in enumerate(document)]
    return [_one(document, options, "")]


def _one(job: object, options: Mapping[str, Any], where: str) -> JobSpec:
    if not isinstance(job, dict):
        raise errors.InvalidJob(
            f'{where}a job is an object with "task_type" and "payload", not {type(job).__name__}'
        )
    unknown = sorted(set(job) - _JOB_FIELDS)
    if unknown:
        raise errors.InvalidJob(
            f"{where}unknown field(s) {', '.join(unknown)}; "
            f"a job has {', '.join(sorted(_JOB_FIELDS))}",
            field=unknown[0],
        )
    kind = job.get("task_type")
    if kind not in _KINDS:
        raise errors.InvalidJob(
            f"{where}task_type must be one of {', '.join(_KINDS)}, got {kind!r}", field="task_type"
        )
    if job.get("status", "pending") != "pending":
        raise errors.InvalidJob(
            f"{where}status {job['status']!r}: a submitted job is pending", field="status"
        )
    payload = job.get("payload")
    if not isinstance(payload, dict):
        raise errors.InvalidJob(f"{where}payload must be an object", field="payload")
    fields, build = _KINDS[kind]
    extra = sorted(set(payload) - fields)
    if extra:
        raise errors.InvalidJob(
            f"{where}{kind}: unknown payload field(s) {', '.join(extra)}; "
            f"known: {', '.join(sorted(fields))}",
            field="payload",
        )
    chosen = dict(options)
    task_id = job.get("task_id")
    if task_id is not None:
        if not isinstance(task_id, str | int) or isinstance(task_id, bool):
            raise errors.InvalidJob(f"{where}task_id must be a string or a number", field="task_id")
        chosen["idempotency_key"] = str(task_id)
    try:
        return build(payload, chosen)
    except errors.InvalidJob as exc:
        raise errors.InvalidJob(f"{where}{exc}", field=exc.field) from None
