"""The options of a job, declared once: their names, types, defaults, meaning and flags.

:func:`taskq.broker.client.specs.call_spec` takes them as keywords
(plus who submits and the retry policy, which no request body names), the
HTTP API's job body (``taskq.server.bodies.JobRequest``) is this record with
the call added, and ``taskq submit`` and ``taskq schedule add`` build their
flags from each option's :class:`Flag` (``taskq.cli.job_options``). Adding an
option here adds it to the body, its OpenAPI schema and the command line; a
unit test holds ``call_spec`` to these fields. An option's bounds are
:mod:`taskq.broker.job_validation`'s, which checks them: the schema states
those very ones (``limits``'s through :mod:`.option_schemas`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from taskq.broker import job_validation
from taskq.broker.client import option_schemas


@dataclass(frozen=True)
class Flag:
    """How the command line spells an option, where that differs from the option's own.

    ``form`` names how the value is written where the option's type does not
    say (a parser of ``taskq.cli.values``: "duration", "time", "size",
    "cpu_seconds", "ids"); ``help`` stands for the description where the
    command line writes the value otherwise than JSON does; ``key`` makes the
    flag set one entry of a mapping option; flags that share a ``group``
    exclude each other. An option only a job submitted now takes (``one_submit``)
    is no flag of ``taskq schedule add``, whose jobs recur.
    """

    name: str
    metavar: str | None = None
    form: str = ""
    help: str = ""
    key: str = ""
    repeatable: bool = False
    one_submit: bool = False
    group: str = ""


def _option(description: str, *flags: Flag) -> msgspec.Meta:
    """An option's description (its OpenAPI text too) and its command-line flags.

    Without flags, the option's flag is its name (``--max-attempts``), read as its type says.
    """
    return msgspec.Meta(description=description, extra={"flags": flags})


class JobOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How a job is queued and run, whatever it calls; values are checked when enqueued."""

    queue: Annotated[
        str, _option("queue name (default: default)"), job_validation.NAME.schema()
    ] = "default"
    priority: Annotated[
        int,
        job_validation.PRIORITY.schema(),
        _option(
            f"higher runs first (default 0; from {job_validation.MIN_PRIORITY} "
            f"to {job_validation.MAX_PRIORITY})"
        ),
    ] = 0
    delay: Annotated[
        float,
        job_validation.DELAY.schema(),
        _option(
            "seconds to wait before the job may run",
            Flag(
                "--delay",
                metavar="DURATION",
                form="duration",
                help="run after 10m, 2h",
                one_submit=True,
                group="when",
            ),
        ),
    ] = 0.0
    run_at: Annotated[
        Annotated[float, job_validation.RUN_AT.schema()] | None,
        _option(
            "when the job may run, in seconds since the epoch",
            Flag(
                "--at",
                metavar="TIME",
                form="time",
                help="run at an ISO 8601 time, e.g. 2026-12-01T09:00 (local time unless it "
                "has a zone)",
                one_submit=True,
                group="when",
            ),
        ),
    ] = None
    max_attempts: Annotated[
        Annotated[int, job_validation.ATTEMPTS.schema()] | None,
        _option(
            f"attempts in all (default: the queue's, else 3; at most "
            f"{job_validation.MAX_ATTEMPTS})",
            Flag("--max-attempts", metavar="N"),
        ),
    ] = None
    timeout: Annotated[
        Annotated[float, job_validation.TIMEOUT.schema()] | None,
        _option(
            "wall-clock limit per attempt, in seconds",
            Flag(
                "--timeout",
                metavar="DURATION",
                form="duration",
                help="wall-clock limit per attempt: 90, 90s, 10m, 2h",
            ),
        ),
    ] = None
    limits: Annotated[
        dict[str, Any],
        msgspec.Meta(extra_json_schema=option_schemas.limits_schema()),
        _option(
            'resource limits, e.g. {"memory_bytes": "512MiB"}',
            Flag(
                "--memory",
                metavar="SIZE",
                form="size",
                help="memory limit, e.g. 512MiB, 2GiB",
                key="memory_bytes",
            ),
            Flag(
                "--cpu",
                metavar="SECONDS",
                form="cpu_seconds",
                help="CPU-time limit, whole seconds",
                key="cpu_seconds",
            ),
        ),
    ] = {}
    labels: Annotated[
        list[Annotated[str, job_validation.NAME.schema()]],
        _option(
            "labels the worker must have",
            Flag(
                "--label",
                metavar="LABEL",
                help="a label the worker must have (repeatable)",
                repeatable=True,
            ),
        ),
    ] = []
    idempotency_key: Annotated[
        Annotated[str, job_validation.NAME.schema()] | None,
        _option(
            "submitting the same key again returns the same job",
            Flag(
                "--key",
                metavar="KEY",
                help="idempotency key: submitting the same key again returns the same job",
                one_submit=True,
            ),
        ),
    ] = None
    after: Annotated[
        tuple[int, ...],
        _option(
            "ids of the jobs this one runs after: it waits until every one has ended",
            Flag(
                "--after",
                metavar="IDS",
                form="ids",
                help="run once these jobs have ended: their ids, e.g. 12,13",
                one_submit=True,
            ),
        ),
    ] = ()
    run_anyway: Annotated[
        bool,
        _option(
            "run once the jobs of after have ended, whatever their outcome (by default one "
            "that ends failed, dead or cancelled cancels this job)",
            Flag(
                "--run-anyway",
                help="with --after: run however those jobs end (by default, one that fails, "
                "dies or is cancelled cancels this job)",
                one_submit=True,
            ),
        ),
    ] = False

    def keywords(self) -> dict[str, Any]:
        """The options (and only they, in a record that adds more), each by its name."""
        return {name: getattr(self, name) for name in JobOptions.__struct_fields__}


@dataclass(frozen=True)
class Declared:
    """One option as declared: its name, type, default, description and flags."""

    name: str
    type: msgspec.inspect.Type
    default: Any
    description: str
    flags: tuple[Flag, ...]


def declared() -> Iterator[Declared]:
    """Every option, in the order of :class:`JobOptions`."""
    info = msgspec.inspect.type_info(JobOptions)
    assert isinstance(info, msgspec.inspect.StructType)
    defaults = JobOptions()
    for field in info.fields:
        assert isinstance(field.type, msgspec.inspect.Metadata)
        yield Declared(
            name=field.name,
            type=field.type.type,
            default=getattr(defaults, field.name),
            description=str((field.type.extra_json_schema or {})["description"]),
            flags=tuple((field.type.extra or {})["flags"])
            or (Flag("--" + field.name.replace("_", "-")),),
        )


def over_declared(declared: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a call of a declared job: ``given`` over the ``declared`` ones.

    Each option given replaces the declared one, but for ``limits``, merged
    limit by limit: ``--cpu 10`` on a job declared with 512 MiB of memory keeps
    the 512 MiB, as the command line's flags for the two are separate.
    """
    merged = {**declared, **given}
    declared_limits, given_limits = declared.get("limits"), given.get("limits")
    if isinstance(declared_limits, Mapping) and isinstance(given_limits, Mapping):
        merged["limits"] = {**declared_limits, **given_limits}
    return merged


def described(name: str) -> str:
    """The description of one option."""
    [option] = [option for option in declared() if option.name == name]
    return option.description


def default(name: str) -> Any:
    """The default of one option."""
    return getattr(JobOptions(), name)
