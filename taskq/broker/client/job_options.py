"""The options of a job, declared once: their names, types, defaults and meaning.

:func:`taskq.broker.client.client_base.call_spec` takes them as keywords
(plus who submits and the retry policy, which no request body names), the
HTTP API's job body (``taskq.server.bodies.JobRequest``) is this record with
the call added, and ``taskq submit`` takes its flags' defaults and help from
it (``taskq.cli.job_options``). A unit test holds ``call_spec`` to these
fields.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from taskq.broker import job_validation


class JobOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How a job is queued and run, whatever it calls; values are checked when enqueued."""

    queue: Annotated[str, msgspec.Meta(description="queue name (default: default)")] = "default"
    priority: Annotated[
        int,
        msgspec.Meta(
            description=f"higher runs first (default 0; from {job_validation.MIN_PRIORITY} "
            f"to {job_validation.MAX_PRIORITY})"
        ),
    ] = 0
    delay: Annotated[float, msgspec.Meta(description="seconds to wait before the job may run")] = (
        0.0
    )
    run_at: Annotated[
        float | None, msgspec.Meta(description="when the job may run, in seconds since the epoch")
    ] = None
    max_attempts: Annotated[
        int | None,
        msgspec.Meta(
            description=f"attempts in all (default: the queue's, else 3; at most "
            f"{job_validation.MAX_ATTEMPTS})"
        ),
    ] = None
    timeout: Annotated[
        float | None, msgspec.Meta(description="wall-clock limit per attempt, in seconds")
    ] = None
    limits: Annotated[
        dict[str, Any],
        msgspec.Meta(description='resource limits, e.g. {"memory_bytes": "512MiB"}'),
    ] = {}
    labels: Annotated[list[str], msgspec.Meta(description="labels the worker must have")] = []
    idempotency_key: Annotated[
        str | None,
        msgspec.Meta(description="submitting the same key again returns the same job"),
    ] = None

    def keywords(self) -> dict[str, Any]:
        """The options (and only they, in a record that adds more) as ``call_spec`` takes them."""
        return {name: getattr(self, name) for name in JobOptions.__struct_fields__}


def described(name: str) -> str:
    """The description of one option, as the help of its command-line flag."""
    info = msgspec.inspect.type_info(JobOptions)
    assert isinstance(info, msgspec.inspect.StructType)
    [field] = [field for field in info.fields if field.name == name]
    assert isinstance(field.type, msgspec.inspect.Metadata)
    return str((field.type.extra_json_schema or {})["description"])


def default(name: str) -> Any:
    """The default of one option, as the default of its command-line flag."""
    return getattr(JobOptions(), name)
