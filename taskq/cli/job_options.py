"""The options that describe a job, shared by ``taskq submit`` and ``taskq schedule add``."""

from __future__ import annotations

import argparse
from typing import Any

from taskq.broker import job_validation
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
    """Queue, priority, attempts and resource limits."""
    parser.add_argument("--queue", default="default", help="queue name (default: default)")
    parser.add_argument(
        "--priority",
        type=int,
        default=0,
        help=f"higher runs first (default 0; from {job_validation.MIN_PRIORITY} "
        f"to {job_validation.MAX_PRIORITY})",
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=None,
        metavar="N",
        help=f"attempts in all (default: the queue's, else 3; at most "
        f"{job_validation.MAX_ATTEMPTS})",
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
