"""What ``taskq submit`` runs: a call, a Python file's function, a shell command, or a JSON job."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from taskq import errors
from taskq.broker.client.client import NamedCall, call_spec, python_exec_spec, shell_spec
from taskq.broker.client.declarations import batch_entry
from taskq.broker.client.seed_jobs import seed_job_specs
from taskq.broker.records import JobSpec, PayloadKind
from taskq.cli import values


def add_payload_options(parser: argparse.ArgumentParser) -> None:
    """The other kinds of job than a call of pkg.mod:func, one at a time."""
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument(
        "--python",
        metavar="FILE:FUNCTION",
        help="send FILE's code and call its FUNCTION with the ARGs (python_exec; the worker "
        "needs allow_python_exec)",
    )
    kinds.add_argument(
        "--shell",
        metavar="COMMAND",
        help="run COMMAND with /bin/sh -c; the result is its exit code and stdout "
        "(the worker needs allow_shell)",
    )
    kinds.add_argument(
        "--json-job",
        metavar="FILE",
        help='submit the job(s) of a JSON file ("-": stdin): {"task_type": "python_exec", '
        '"payload": {"code": ..., "function": ..., "args": [...]}}, or a list of them',
    )
    parser.add_argument("--cwd", metavar="DIR", help="with --shell: the directory to run in")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --shell: a variable to set (repeatable)",
    )


def usage_problem(args: argparse.Namespace) -> str:
    """What is wrong with the way the job is named (``""``: nothing), for a usage error."""
    if (args.cwd is not None or args.env) and args.shell is None:
        return "--cwd and --env go with --shell"
    # Options that only mean something beside another: alone, they would be ignored unsaid.
    if args.wait_timeout is not None and not args.wait:
        return "--wait-timeout goes with --wait"
    if getattr(args, "run_anyway", False) and not getattr(args, "after", None):
        return "--run-anyway goes with --after"
    whole = args.shell is not None or args.json_job is not None
    if whole and (args.target is not None or args.args or args.kwargs):
        return (
            "--shell and --json-job take no pkg.mod:func, ARGs or --kwargs: the job is "
            "all in the command or the file"
        )
    if not whole and args.python is None and args.target is None:
        return (
            "the following arguments are required: pkg.mod:func "
            "(or --python FILE:FUNCTION, --shell COMMAND, --json-job FILE)"
        )
    return ""


def by_name(args: argparse.Namespace) -> bool:
    """Whether the command line submits a call of a declared job by its name."""
    whole = (args.python, args.shell, args.json_job)
    return all(each is None for each in whole) and not args.unchecked


def seed_calls(specs: Sequence[JobSpec], given: Mapping[str, Any]) -> dict[int, NamedCall]:
    """The calls of pkg.mod:func among a JSON job file's jobs, by their places, as calls by
    name: with the options the command line ``given`` and each job's own key (its task_id)."""
    calls = {}
    for index, spec in enumerate(specs):
        if spec.kind is not PayloadKind.CALL:
            continue
        payload = spec.payload
        options = {**given, "kwargs": payload["kwargs"], "idempotency_key": spec.idempotency_key}
        where = batch_entry(index) if len(specs) > 1 else ""
        calls[index] = NamedCall(payload["target"], payload["args"], options, where)
    return calls


def submitted_specs(args: argparse.Namespace, options: dict[str, Any]) -> list[JobSpec]:
    """The jobs the command line describes, each with ``options``; several only from a list.

    The command line has passed :func:`usage_problem`.
    """
    if args.shell is not None:
        return [shell_spec(args.shell, cwd=args.cwd, env=_variables(args.env), **options)]
    if args.json_job is not None:
        if options["idempotency_key"] is not None:
            raise errors.InvalidJob("with --json-job, a job's task_id is its key: drop --key")
        return seed_job_specs(_read_json(args.json_job), **options)
    if args.python is not None:
        # With --python every positional word is an argument of the function.
        words = ([] if args.target is None else [_json(args.target)]) + args.args
        path, function = _file_and_function(args.python)
        return [python_exec_spec(_read(path), function, words, args.kwargs, **options)]
    return [call_spec(args.target, args.args, args.kwargs, **options)]


def _file_and_function(text: str) -> tuple[Path, str]:
    path, colon, function = text.rpartition(":")
    if not colon or not path or not function:
        raise errors.InvalidJob(f"--python {text}: write FILE:FUNCTION, e.g. jobs.py:count_words")
    return Path(path), function


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.InvalidJob(f"cannot read {path}: {exc}") from None


def _read_json(name: str) -> Any:
    text = sys.stdin.read() if name == "-" else _read(Path(name))
    try:
        return json.loads(text)
    except ValueError as exc:
        raise errors.InvalidJob(f"--json-job {name} is not JSON: {exc}") from None


def _json(text: str) -> Any:
    try:
        return values.json_value(text)
    except argparse.ArgumentTypeError as exc:
        raise errors.InvalidJob(str(exc)) from None


def _variables(pairs: list[str]) -> dict[str, str]:
    variables = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise errors.InvalidJob(f"--env {pair!r}: write NAME=VALUE")
        variables[name] = value
    return variables
