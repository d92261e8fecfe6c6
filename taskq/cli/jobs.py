"""Commands about jobs: submit, status, result, cancel, retry, jobs."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from taskq import errors
from taskq.broker.client.client import (
    Client,
    JobHandle,
    JobQuery,
    NamedCall,
    RetryResult,
    default_submitter,
)
from taskq.broker.job_validation import check_parents, check_target, dotted_meaning
from taskq.broker.records import MAX_RELATIVES, Job, JobSpec, JobState
from taskq.cli import (
    command,
    connection,
    job_options,
    output,
    payloads,
    result_wait,
    undeclared,
    values,
    workflows,
)

T = TypeVar("T")

# What ``cancel`` and ``retry`` say of a job they moved.
_MOVES = {
    "cancelled": "cancelled",
    "cancel_requested": "running; asked to stop at its worker's next heartbeat",
    "requeued": "queued again",
    "waiting": "waiting for its parents again",
}


def add_commands(commands: command.Commands) -> None:
    """Register the job commands."""
    submit = command.add(
        commands,
        "submit",
        cmd_submit,
        help="enqueue a call of pkg.mod:func with JSON arguments (or code, a command, a JSON "
        "job); prints the job id",
        description="Enqueue a call of pkg.mod:func with JSON arguments and print the job id; "
        "or, with --python, --shell or --json-job, code, a command or jobs written as JSON.\n\n"
        "  taskq submit mypkg.images:resize '\"in.png\"' 800 --queue images --memory 512MiB\n"
        "  taskq submit mypkg.jobs:add 1 2 --wait        # prints the result: 3\n"
        "  taskq submit --python jobs.py:count_words '\"hello world\"' --wait\n"
        '  taskq submit --shell \'wc -l data.csv\' --wait  # {"exit_code": 0, "stdout": ...}\n'
        "  taskq submit --json-job job.json              # the seed format; - reads stdin",
        json=True,
    )
    job_options.add_call_arguments(submit, optional=True)
    payloads.add_payload_options(submit)
    job_options.add_job_options(submit)
    job_options.add_submit_options(submit)
    # Which options go together is told as the parser tells any usage error.
    submit.add_argument(
        "--unchecked",
        action="store_true",
        help="submit pkg.mod:func (or a --json-job file's calls) even though no worker has "
        "declared it (for workers yet to start); its options are then only those given",
    )
    submit.add_argument(
        "--wait", action="store_true", help="wait for the job and print its result as JSON"
    )
    submit.add_argument(
        "--wait-timeout",
        type=values.seconds,
        metavar="DURATION",
        help="with --wait: give up after this long (exit 1); default: wait forever",
    )

    status = command.add(commands, "status", cmd_status, help="show one job", json=True)
    status.add_argument("id", type=command.a_job_id, help="job id")

    result = command.add(
        commands,
        "result",
        cmd_result,
        help="print a finished job's result as JSON (exit 1 if it failed)",
        json=True,
    )
    result.add_argument("id", type=command.a_job_id, help="job id")
    result.add_argument("--wait", action="store_true", help="wait until the job finishes")
    result.add_argument(
        # --wait-timeout too: the spelling submit --wait takes.
        "--timeout",
        "--wait-timeout",
        dest="timeout",
        type=values.seconds,
        metavar="DURATION",
        help="with --wait: give up after this long (exit 1)",
    )

    cancel = command.add(
        commands,
        "cancel",
        cmd_cancel,
        help="cancel jobs: queued ones at once, running ones at their worker's next heartbeat",
        json=True,
    )
    cancel.add_argument("ids", type=command.a_job_id, nargs="+", metavar="ID", help="job ids")

    retry = command.add(
        commands, "retry", cmd_retry, help="queue failed, dead or cancelled jobs again", json=True
    )
    retry.add_argument("ids", type=command.a_job_id, nargs="+", metavar="ID", help="job ids")

    jobs = command.add(commands, "jobs", cmd_jobs, help="list jobs, newest first", json=True)
    jobs.add_argument("--state", choices=[state.value for state in JobState])
    jobs.add_argument("--queue")
    jobs.add_argument(
        "--worker",
        metavar="WORKER",
        help="jobs run by this worker: its id, or its name (every worker of that name)",
    )
    jobs.add_argument("--submitter")
    jobs.add_argument("--text", help="a queue name, or any part of the payload")
    jobs.add_argument(
        "--workflow", type=command.a_workflow_id, metavar="ID", help="the jobs of this workflow"
    )
    jobs.add_argument(
        "--limit", type=values.count, default=50, help="at most this many (default 50, most 1000)"
    )
    jobs.add_argument(
        "--before", type=command.a_job_id, metavar="ID", help="only jobs older than this id"
    )


def unknown(job_id: object) -> str:
    """What a command says of an id no job has, with where to find the known ones (as
    ``taskq workflow show`` does): a mistyped id otherwise leaves the reader nothing to go on."""
    return f"no job with id {job_id} (taskq jobs lists the newest)"


@contextlib.contextmanager
def known(job_id: int) -> Iterator[None]:
    """Refuse an unknown job id (:class:`taskq.errors.JobNotFound`, exit 1) as
    :func:`unknown` says it, on a store or over HTTP alike."""
    try:
        yield
    except errors.JobNotFound as exc:
        raise errors.JobNotFound(unknown(job_id)) from exc


def _finish(handle: JobHandle, timeout: float | None, as_json: bool) -> int:
    """Wait for the job (within :func:`result_wait.notes_on_stderr`); print its result as JSON
    (``as_json``: its whole record), or raise JobFailed (exit 1), after its record with it."""
    try:
        result = handle.result(timeout=timeout)
    except errors.JobFailed as exc:
        if as_json:
            # A script reads how it ended (state, error) from the record, as of a success.
            output.print_json(exc.job if isinstance(exc.job, Job) else handle.client.get(handle.id))
        raise
    if as_json:
        output.print_json(handle.client.get(handle.id))
    else:
        print(json.dumps(result, ensure_ascii=False))
    return command.EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    problem = payloads.usage_problem(args)
    if problem:
        args.usage_error(problem)
    url = connection.named_url(args)
    named = payloads.by_name(args)
    after = getattr(args, "after", None)
    if after:
        # The command line's own mistake (a job named twice) is a usage error, here, so
        # that a refusal of --after by the store below is always the store's jobs'.
        check_parents(after, "--after")
    jobs: list[JobSpec | NamedCall] = []
    if named:
        if dotted_meaning(args.target) is None or undeclared.new_store_file(url) is not None:
            # A dotted path (mypkg.tasks) is left to a store's refusal, which names the
            # declared jobs it may mean.
            check_target(args.target)
        undeclared.refuse_in_new_store(url, args.target)
    else:
        # Made before the store is opened, which creates a SQLite file: a job refused
        # leaves none behind. The command's client submits as default_submitter() too.
        specs = payloads.submitted_specs(
            args, job_options.job_options(args, submitter=default_submitter())
        )
        calls: dict[int, NamedCall] = {}
        if args.json_job is not None and not args.unchecked:
            # A file's calls of pkg.mod:func go as declared, as one named on the line does.
            calls = payloads.seed_calls(specs, job_options.given_options(args))
            if calls:
                undeclared.refuse_in_new_store(url, undeclared.FILE_CALLS)
        jobs = [calls.get(index, spec) for index, spec in enumerate(specs)]
    with connection.client_at(url, config=args.config) as client:
        # A name is resolved as declared: by the client, or over HTTP by the server.
        with (
            undeclared.store_named_in_refusal(
                client, url, args.target if named else undeclared.FILE_CALLS
            ),
            _parents_as_found(after),
        ):
            if named:
                given = {**job_options.given_options(args), "kwargs": args.kwargs}
                handles = [client.submit(args.target, *args.args, **given)]
            else:
                handles = client.submit_many(jobs)
        if args.wait:
            with result_wait.notes_on_stderr():  # each reason once for all of a --json-job file
                for handle in handles:
                    _finish(handle, args.wait_timeout, args.json)
            return command.EXIT_OK
    if args.json:
        # --json-job may submit several jobs: a list of ids, however many.
        ids = [{"id": handle.id} for handle in handles]
        output.print_json(ids if args.json_job is not None else ids[0])
    else:
        for handle in handles:
            print(handle.id)
    return command.EXIT_OK


class ParentsRefused(errors.TaskqError):
    """The store refused the jobs ``--after`` names as it found them (no job has an id, or
    they are in different workflows): a runtime error, exit 1, as a missing job is."""


@contextlib.contextmanager
def _parents_as_found(after: Sequence[int] | None) -> Iterator[None]:
    """Turn the store's refusal of ``after`` (InvalidJob, a usage error's class) into
    :class:`ParentsRefused`, its words unchanged; ``after`` has passed check_parents."""
    try:
        yield
    except errors.InvalidJob as exc:
        if not after or exc.field != "after" or isinstance(exc, errors.IdempotencyConflict):
            raise
        raise ParentsRefused(str(exc)) from exc


def cmd_status(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client, known(args.id):
        job = client.get(args.id)
        family = [] if args.json else workflows.relatives_lines(client, job)
        held = None if args.json else result_wait.why_queued(client, job)
    if args.json:
        output.print_json(job)
        return command.EXIT_OK
    # Asked of a running job; once it has ended, its state says how the cancel went.
    asked = job.cancel_requested and not job.state.finished
    state = job.state.value + (" (cancel requested)" if asked else "")
    lines = [
        ("job", str(job.id)),
        ("state", state),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("queue", f"{job.queue}, priority {job.priority}"),
        ("call", output.call(job)),
        ("submitter", job.submitter or "-"),
        ("created", f"{output.local_time(job.created_at)} ({output.relative(job.created_at)})"),
    ]
    if job.state is JobState.QUEUED:
        lines.append(("runs", f"{output.local_time(job.run_at)} ({output.relative(job.run_at)})"))
    lines += [("note", held)] if held else []
    if job.started_at is not None:
        lines.append(("started", output.local_time(job.started_at)))
    if job.finished_at is not None:
        took = job.finished_at - job.started_at if job.started_at is not None else None
        lines.append(
            ("finished", f"{output.local_time(job.finished_at)} (took {output.duration(took)})")
        )
    if job.worker_id:
        lines.append(("worker", job.worker_id))
    if job.progress is not None:
        lines.append(("progress", f"{job.progress:.0%} {job.progress_message or ''}".rstrip()))
    if job.timeout is not None:
        lines.append(("timeout", output.span(job.timeout)))
    if job.limits:
        lines.append(("limits", ", ".join(f"{k}={v}" for k, v in sorted(job.limits.items()))))
    if job.labels:
        lines.append(("labels", ", ".join(job.labels)))
    if job.state is JobState.SUCCEEDED:
        lines.append(("result", output.one_line(output.compact_json(job.result), 200)))
    # A failed job's traceback (below) ends with its error; an open job's is an earlier attempt's.
    ended, earlier = output.ended_error(job), output.last_attempt_error(job)
    traceback = str((ended or {}).get("traceback") or "").rstrip()
    if ended and not traceback:
        lines.append(("error", output.one_line(output.error_line(ended), 200)))
    if earlier:
        lines.append(("last attempt", output.one_line(output.error_line(earlier), 200)))
    lines += family
    lines.append(("key", job.idempotency_key))
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        print(f"{name.ljust(width)}  {value}")
    if traceback:
        # Where a job failed is what its reader came for; --json was the only way to it.
        print(f"\n{traceback}")
    return command.EXIT_OK


def cmd_result(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait:
        args.usage_error("--timeout (--wait-timeout) goes with --wait")
    with connection.client(args, read_only=True) as client, known(args.id):
        handle = JobHandle(client, args.id)
        if not args.wait:
            state = handle.status()
            if not state.finished:
                raise errors.ResultTimeout(
                    f"job {args.id} is still {state.value}; add --wait to wait for it"
                )
        with result_wait.notes_on_stderr():
            return _finish(handle, args.timeout if args.wait else 0, args.json)


def _report_moves(
    client: Client,
    ids: Sequence[int],
    moved: dict[int, str],
    unchanged: str,
    as_json: bool,
    revived: dict[int, list[int]] | None = None,
) -> int:
    """Say what became of each id; exit 1 when one names no job or was left as it was.

    ``moved`` maps the ids the operation changed to what happened to them;
    ``unchanged`` says why the others were not: an error each, after the
    job's state, so that a script sees the refusal in the exit code.
    ``revived``: the jobs waiting on a job moved that came back with it, said
    after its line (``--json``: ``revived``, only where there are some).
    """
    report: list[dict[str, object]] = []
    for job_id in dict.fromkeys(ids):
        if job_id in moved:
            report.append({"id": job_id, "outcome": moved[job_id]})
            if revived and revived.get(job_id):
                report[-1]["revived"] = revived[job_id]
            continue
        try:
            state = client.get(job_id).state
        except errors.JobNotFound:
            report.append({"id": job_id, "outcome": "not_found"})
        else:
            report.append({"id": job_id, "outcome": "unchanged", "state": state.value})
    if as_json:
        output.print_json(report)
    for entry in report:
        if entry["outcome"] == "not_found":
            output.warn(f"taskq: error: {unknown(entry['id'])}")
        elif entry["outcome"] == "unchanged":
            output.warn(f"taskq: error: job {entry['id']} ({entry['state']}): {unchanged}")
        elif not as_json:
            print(f"job {entry['id']}: {_MOVES[str(entry['outcome'])]}{_brought_back(entry)}")
    refused = any(entry["outcome"] in {"not_found", "unchanged"} for entry in report)
    return command.EXIT_ERROR if refused else command.EXIT_OK


def _brought_back(entry: dict[str, object]) -> str:
    """What the line of a job retried adds of the jobs waiting on it that came back."""
    revived = entry.get("revived")
    if not isinstance(revived, list):
        return ""
    return f"; {len(revived)} job{'' if len(revived) == 1 else 's'} waiting on it brought back"


def _each_known(move: Callable[..., T], ids: Sequence[int]) -> list[T]:
    """``move(*ids)``; when an id names no job (the client then refuses them all), ``move``
    of each id alone, the unknown ones left for :func:`_report_moves` to name."""
    try:
        return [move(*ids)]
    except errors.JobNotFound:
        pass
    answers = []
    for job_id in dict.fromkeys(ids):
        with contextlib.suppress(errors.JobNotFound):
            answers.append(move(job_id))
    return answers


def cmd_cancel(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        done = _each_known(client.cancel, args.ids)
        moved = {job_id: "cancelled" for each in done for job_id in each.cancelled}
        moved.update({job_id: "cancel_requested" for each in done for job_id in each.requested})
        return _report_moves(client, args.ids, moved, "already ended, not cancelled", args.json)


def cmd_retry(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        requeued = _each_known(client.retry, args.ids)
        moved = {job_id: _retried(client, job_id) for each in requeued for job_id in each}
        revived = {
            job_id: brought
            for each in requeued
            for job_id, brought in _revived_by(client, each).items()
        }
        unchanged = "only failed, dead or cancelled jobs are retried"
        return _report_moves(client, args.ids, moved, unchanged, args.json, revived)


def _retried(client: Client, job_id: int) -> str:
    """What a retry made of the job, as the store has it now: ``waiting`` for its parents
    again, or ``requeued``. The retry's answer names the jobs it moved, not where each went:
    a job with parents waits for them, unless they had all ended and it was queued."""
    try:
        state = client.get(job_id).state
    except errors.JobNotFound:  # pruned since, so not waiting
        return "requeued"
    return "waiting" if state is JobState.WAITING else "requeued"


def _revived_by(client: Client, answer: RetryResult) -> dict[int, list[int]]:
    """The jobs one retry brought back, by the job retried that each waits on.

    The retry names them all at once; of one job retried, all are its. Of
    several, each goes to the nearest job retried above it, found by walking
    down from each (ascending) through the jobs brought back only: a job is
    brought back through the chain of jobs its parent's end cancelled, every
    one of which came back too. One the walk cannot place (over HTTP, a job
    outside a workflow has no read of its children) goes to the first job
    retried, so that the counts still add up to what moved.
    """
    if not answer.revived:
        return {}
    if len(answer) == 1:
        return {answer[0]: list(answer.revived)}
    left = set(answer.revived)
    found: dict[int, list[int]] = {}
    for job_id in answer:
        below = [job_id]
        while below and left:
            children = [child for child in _children(client, below.pop()) if child in left]
            left.difference_update(children)
            found.setdefault(job_id, []).extend(children)
            below.extend(children)
    if left:
        found.setdefault(answer[0], []).extend(left)
    return {job_id: sorted(ids) for job_id, ids in found.items() if ids}


def _children(client: Client, job_id: int) -> list[int]:
    """The ids of the jobs that wait on the job (a job spawned by it without waiting on it
    is not among them)."""
    try:
        found = client.relatives(job_id, limit=MAX_RELATIVES)
    except errors.JobNotFound:  # pruned since: nothing to walk through
        return []
    return [child for child, _ in found.children]


def cmd_jobs(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        found = client.list(
            JobQuery(
                state=JobState(args.state) if args.state else None,
                queue=args.queue,
                worker_id=args.worker,
                submitter=args.submitter,
                text=args.text,
                workflow_id=args.workflow,
                before=args.before,
                limit=args.limit,
            )
        )
        if not found and args.workflow is not None:
            # An unknown workflow would list as one with no jobs: refused, as workflow show does.
            with workflows.known(args.workflow):
                client.workflow(args.workflow)
    if args.json:
        output.print_json(found)
        return command.EXIT_OK
    if not found:
        print("no jobs")
        return command.EXIT_OK
    output.print_table(
        ("ID", "STATE", "QUEUE", "CALL", "ATTEMPTS", "CREATED", "WORKER"),
        [
            (
                job.id,
                job.state.value,
                job.queue,
                output.one_line(output.call(job), 48),
                f"{job.attempts}/{job.max_attempts}",
                output.local_time(job.created_at),
                job.worker_id or "-",
            )
            for job in found
        ],
    )
    if len(found) == args.limit:
        output.warn(f"(more: add --before {found[-1].id})")
    return command.EXIT_OK
