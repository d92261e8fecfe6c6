"""The options that describe a job, shared by ``taskq submit`` and ``taskq schedule add``."""

from __future__ import annotations

import argparse
from typing import Any

from taskq.broker.client import job_options as broker_options
from taskq.broker.client.client import call_spec
from taskq.broker.records import JobSpec
from taskq.cli import values


def add_call_arguments(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The target and its JSON arguments; ``optional`` where other options may name the job."""
    parser.add_argument(
        "target",
        nargs="?" if optional else None,
        metavar="pkg.mod:func",
        help="the function to call",
    )
    parser.add_argument(
        "args",
        nargs="*",
        type=values.json_value,
        metavar="ARG",
        help="positional arguments, each a JSON value: 1 '\"text\"' '[1, 2]' '{\"a\": 1}'",
    )
    parser.add_argument(
        "--kwargs",
        type=values.json_object,
        default={},
        metavar="JSON",
        help="keyword arguments as a JSON object, e.g. '{\"size\": 800}'",
    )


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """Queue, priority, attempts and resource limits; defaults and help as the broker declares."""
    parser.add_argument(
        "--queue", default=broker_options.default("queue"), help=broker_options.described("queue")
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=broker_options.default("priority"),
        help=broker_options.described("priority"),
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=broker_options.default("max_attempts"),
        metavar="N",
        help=broker_options.described("max_attempts"),
    )
    parser.add_argument(
        "--timeout",
        type=values.seconds,
        metavar="DURATION",
        help="wall-clock limit per attempt: 90, 90s, 10m, 2h",
    )
    parser.add_argument(
        "--memory", type=values.memory, metavar="SIZE", help="memory limit, e.g. 512MiB, 2GiB"
    )
    parser.add_argument(
        "--cpu", type=values.cpu_seconds, metavar="SECONDS", help="CPU-time limit, whole seconds"
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label the worker must have (repeatable)",
    )


def job_spec(
    args: argparse.Namespace,
    *,
    submitter: str,
    delay: float = 0.0,
    run_at: float | None = None,
    key: str | None = None,
) -> JobSpec:
    """The call the parsed options describe (checked by the broker when enqueued)."""
    options = job_options(args, submitter=submitter, delay=delay, run_at=run_at, key=key)
    return call_spec(args.target, args.args, args.kwargs, **options)


def job_options(
    args: argparse.Namespace,
    *,
    submitter: str,
    delay: float = 0.0,
    run_at: float | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """The options of any kind of job, as ``call_spec`` and its kin take them."""
    limits: dict[str, Any] = {}
    if args.memory is not None:
        limits["memory_bytes"] = args.memory
    if args.cpu is not None:
        limits["cpu_seconds"] = args.cpu
    return {
        "queue": args.queue,
        "priority": args.priority,
        "delay": delay,
        "run_at": run_at,
        "max_attempts": args.max_attempts,
        "timeout": args.timeout,
        "limits": limits,
        "labels": args.label,
        "idempotency_key": key,
        "submitter": submitter,
    }
