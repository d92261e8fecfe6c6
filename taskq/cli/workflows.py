"""The `workflow list|show|wait|cancel|retry` commands; a job's relatives in `status`."""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from taskq import errors
from taskq.broker.client.client import Client, JobQuery
from taskq.broker.records import Job, JobState, WorkflowInfo, WorkflowStatus
from taskq.cli import (
    command,
    connection,
    output,
    result_wait,
    state_colors,
    values,
    workflow_tree,
)

# The most jobs one listing request returns: a workflow is read a page at a time.
_PAGE = 1000
# Up to how many jobs ``workflow show`` reads one by one, those it draws; past that it
# reads every job's record a page at a time, as ``--all`` and ``--json`` do.
_READ_ONE_BY_ONE = 200
# How many parents or children ``status`` names before it sends the reader to the tree.
_RELATIVES_SHOWN = 10
# How many of a job's children (or of the roots) ``workflow show`` draws before the
# rest stand as one line: a screen, where a fan-out over ten thousand files would
# print twenty thousand lines.
_SIBLINGS_DRAWN = 20
_CALL_WIDTH = 60


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq workflow ACTION``."""
    actions = command.add_group(
        commands,
        "workflow",
        help="see or steer workflows: list them, show one's jobs as a tree, wait for one to end, "
        "cancel, retry",
        description="See or steer a workflow (jobs that run after other jobs).\n\n"
        "  taskq workflow list            # the newest workflows, their jobs counted by state\n"
        "  taskq workflow show 4          # its jobs as a tree from the roots, with states\n"
        "  taskq workflow wait 4          # until all of it has ended; exit 1 unless it succeeded\n"
        "  taskq workflow cancel 4        # cancel every job of it that has not ended\n"
        "  taskq workflow retry 4         # queue its failed, dead or cancelled jobs again\n"
        "  taskq jobs --workflow 4        # its jobs as a list",
        dest="action",
    )
    listing = command.add(
        actions,
        "list",
        cmd_list,
        help="the newest workflows, their jobs counted by state",
        json=True,
    )
    listing.add_argument("--name", help="only the workflows of this name")
    listing.add_argument("--submitter", help="only the workflows this submitter submitted")
    listing.add_argument(
        "--status",
        choices=[status.value for status in WorkflowStatus],
        help="only the workflows in this status: running (a job has yet to end), "
        "succeeded (every job), failed (a job failed or died), cancelled (the rest)",
    )
    listing.add_argument(
        "--limit", type=values.count, default=50, help="at most this many (default 50, most 1000)"
    )
    listing.add_argument(
        "--before",
        type=command.a_workflow_id,
        metavar="ID",
        help="only workflows older than this id",
    )
    # In the order the description lists them: from finding a workflow to steering it.
    show = _one_workflow(
        actions, "show", cmd_show, "draw the workflow's jobs as a tree, with their states"
    )
    show.add_argument(
        "--all",
        action="store_true",
        help=f"draw every job; by default a job's children (or the roots) past "
        f"the first {_SIBLINGS_DRAWN} stand as one line with their states counted",
    )
    waiting = _one_workflow(
        actions,
        "wait",
        cmd_wait,
        "wait until every job of the workflow has ended; exit 1 unless all succeeded",
    )
    waiting.add_argument(
        # --wait-timeout too: the spelling submit --wait takes.
        "--timeout",
        "--wait-timeout",
        dest="timeout",
        type=values.seconds,
        metavar="DURATION",
        help="give up after this long (exit 1); default: wait as long as it takes",
    )
    _one_workflow(
        actions, "cancel", cmd_cancel, "cancel every job of the workflow that has not ended"
    )
    _one_workflow(
        actions, "retry", cmd_retry, "queue the workflow's failed, dead or cancelled jobs again"
    )


def _one_workflow(
    actions: command.Commands, name: str, handler: command.Handler, text: str
) -> command.Parser:
    """``taskq workflow NAME ID``: an action on the workflow of that id."""
    parser = command.add(actions, name, handler, help=text, json=True)
    parser.add_argument("id", type=command.a_workflow_id, help="workflow id")
    return parser


@contextlib.contextmanager
def known(workflow_id: int) -> Iterator[None]:
    """Refuse an unknown workflow id (:class:`taskq.errors.WorkflowNotFound`, exit 1) with
    where to find the known ones: a mistyped id otherwise leaves the reader nothing to go on."""
    try:
        yield
    except errors.WorkflowNotFound as exc:
        raise errors.WorkflowNotFound(
            f"no workflow with id {workflow_id} (taskq workflow list shows the newest)"
        ) from exc


def _jobs_oldest_first(client: Client, workflow_id: int, ids: Sequence[int]) -> Iterator[Job]:
    """The records of the workflow's jobs ``ids`` (ascending), oldest first, a page at a
    time: a listing reads newest first, so each page is one range of ``ids`` read down from
    its top, and none is held past its page. A job pruned since ``ids`` were read is left out."""
    for start in range(0, len(ids), _PAGE):
        chunk = ids[start : start + _PAGE]
        page = client.list(JobQuery(workflow_id=workflow_id, before=chunk[-1] + 1, limit=_PAGE))
        # The range holds at most a page of the workflow's jobs (those of ``ids``; a job
        # spawned later has a higher id), so one read covers it; below it, the last range's.
        yield from reversed([job for job in page if job.id >= chunk[0]])


def _drawn_jobs(
    client: Client, workflow_id: int, wanted: Sequence[int], every: Sequence[int]
) -> dict[int, Job]:
    """The jobs a drawing shows, by id: read one by one when few (a wide fan-out drawn in
    a screen), else with the rest (``every`` job's id, ascending). A job pruned since it was
    counted is left out."""
    if len(wanted) > _READ_ONE_BY_ONE:
        return {job.id: job for job in _jobs_oldest_first(client, workflow_id, every)}
    found: dict[int, Job] = {}
    for job_id in wanted:
        try:
            found[job_id] = client.get(job_id)
        except errors.JobNotFound:
            continue
    return found


def cmd_list(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        found = client.workflows(
            name=args.name,
            submitter=args.submitter,
            status=args.status,
            before=args.before,
            limit=args.limit,
        )
    if args.json:
        output.print_json(found)
        return command.EXIT_OK
    if not found:
        print("no workflows")
        return command.EXIT_OK
    output.print_table(
        ("ID", "NAME", "SUBMITTER", "SUBMITTED", "STATUS", "JOBS", "STATES"),
        [
            (
                info.id,
                output.one_line(info.name, 32) or "-",
                info.submitter or "-",
                output.local_time(info.created_at),
                info.status.value,
                sum(info.counts.values()),
                _states(info.counts, color=False) or "none left",
            )
            for info in found
        ],
    )
    if len(found) == args.limit:
        output.warn(f"(more: add --before {found[-1].id})")
    return command.EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client, known(args.id):
        info = client.workflow(args.id)
        # Edges before jobs: a running job's spawn writes its jobs and their edges in one
        # write, so every job an edge names is among the jobs read after it.
        edges = client.workflow_edges(args.id)
        states = {brief.id: brief.state for brief in client.workflow_jobs(args.id)}
        if args.json:
            # Streamed: a hundred thousand jobs' records, held whole as dicts and as one
            # string, took most of a gigabyte.
            jobs = _jobs_oldest_first(client, args.id, list(states))
            output.print_json_fields({"workflow": info, "jobs": jobs, "edges": edges})
            return command.EXIT_OK
        # Where each job goes, before the records are read: of a fan-out over a hundred
        # thousand files, only the forty or so drawn are read.
        layout = workflow_tree.laid_out(
            states, edges, most_siblings=None if args.all else _SIBLINGS_DRAWN
        )
        by_id = _drawn_jobs(client, args.id, layout.drawn, list(states))
    color = state_colors.wanted()

    def line(job_id: int) -> str:
        job = by_id.get(job_id)
        return f"{job_id} (pruned)" if job is None else _job_line(job, color=color)

    def more(hidden: Sequence[int]) -> str:
        known = [states[job_id] for job_id in hidden if job_id in states]
        counted = _states(Counter(known), color=color)
        return f"... {len(hidden)} more" + (f": {counted}" if counted else "")

    print(_heading(info))
    for text in layout.lines(line, more):
        print(text)
    summary = _summary(list(states.values()), color=color)
    if layout.left_out:
        summary += f" ({len(layout.left_out)} not drawn: --all draws every job)"
    print(summary)
    return command.EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client, known(args.id):
        info = result_wait.workflow(client, args.id, args.timeout)
    if args.json:
        output.print_json(info)
    else:
        name = f" {info.name!r}" if info.name else ""
        jobs = sum(info.counts.values())
        states = _states(info.counts, color=state_colors.wanted())
        print(f"workflow {info.id}{name} {info.status.value} ({_jobs(jobs)}: {states})")
    # For a script: 0 only when the pipeline did all it was given to do.
    return command.EXIT_OK if info.status is WorkflowStatus.SUCCEEDED else command.EXIT_ERROR


def _heading(info: WorkflowInfo) -> str:
    name = f" {info.name!r}" if info.name else ""
    by = f", by {info.submitter}" if info.submitter else ""
    submitted = output.local_time(info.created_at)
    return f"workflow {info.id}{name} ({info.status.value}){by}, submitted {submitted}"


def _job_line(job: Job, *, color: bool) -> str:
    state = state_colors.painted(job.state, color=color)
    if job.cancel_requested and job.state is JobState.RUNNING:
        state += " (cancel requested)"
    if job.run_anyway:
        # Else a job that ran under a parent that failed reads as a bug.
        state += " (runs anyway)"
    text = f"{job.id} {state}  {output.one_line(output.call(job), _CALL_WIDTH)}"
    ended, earlier = output.ended_error(job), output.last_attempt_error(job)
    if ended is not None:
        text += f"  ({output.one_line(output.why_ended(ended), _CALL_WIDTH)})"
    elif earlier is not None:
        said = f"last attempt: {output.error_line(earlier)}"
        text += f"  ({output.one_line(said, _CALL_WIDTH)})"
    return text


def _summary(states: Sequence[JobState], *, color: bool) -> str:
    """``5 jobs: 3 succeeded, 1 running, 1 waiting``, of the jobs' ``states``."""
    counted = _states(Counter(states), color=color)
    noun = "job" if len(states) == 1 else "jobs"
    return f"{len(states)} {noun}: {counted}" if counted else "no jobs"


def _states(counts: Mapping[JobState, int], *, color: bool) -> str:
    """``3 succeeded, 1 running, 1 waiting``: the states in the order of their enum ("": none)."""
    return ", ".join(
        f"{counts[state]} {state_colors.painted(state, color=color)}"
        for state in JobState
        if counts.get(state)
    )


def cmd_cancel(args: argparse.Namespace) -> int:
    with connection.client(args) as client, known(args.id):
        moved = client.cancel_workflow(args.id)
    return _say_moved(
        args,
        "cancelled",
        moved,
        done="cancelled (a running one stops at its worker's next heartbeat)",
        none="nothing to cancel; every job of it has ended",
    )


def cmd_retry(args: argparse.Namespace) -> int:
    with connection.client(args) as client, known(args.id):
        moved = client.retry_workflow(args.id)
    return _say_moved(
        args,
        "retried",
        moved,
        # Counted with those retried: the jobs their ends had cancelled, brought back.
        done="retried or brought back (each queued again, or waiting again for its parents)",
        none="nothing to retry; no job of it failed, died or was cancelled",
    )


def _say_moved(args: argparse.Namespace, key: str, moved: int, *, done: str, none: str) -> int:
    """How many jobs a cancel or retry of the whole workflow moved (``key`` in its JSON).

    Exit 1 when it moved none, as ``taskq cancel`` of a job that has ended does (and
    HTTP's 409): a script sees in the exit code that the workflow was left as it was.
    """
    if args.json:
        output.print_json({"workflow_id": args.id, key: moved})
    elif moved:
        print(f"workflow {args.id}: {_jobs(moved)} {done}")
    else:
        print(f"workflow {args.id}: {none}")
    return command.EXIT_OK if moved else command.EXIT_ERROR


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def relatives_lines(client: Client, job: Job) -> list[tuple[str, str]]:
    """``status``'s lines for a job's workflow, parents, children, its spawner and the jobs it
    spawned (none for a job alone)."""
    family = client.relatives(job.id, limit=_RELATIVES_SHOWN + 1)
    lines: list[tuple[str, str]] = []
    if job.workflow_id is not None:
        try:
            info = client.workflow(job.workflow_id)
        except errors.WorkflowNotFound:
            # Pruned with its last other job since the job was read.
            lines.append(("workflow", str(job.workflow_id)))
        else:
            name = f" {info.name!r}" if info.name else ""
            lines.append(("workflow", f"{job.workflow_id}{name} ({info.status.value})"))
    color = state_colors.wanted()
    more = f" and more (taskq workflow show {job.workflow_id})" if job.workflow_id else " and more"
    if family.parents:
        text = _relatives(family.parents, more, color=color)
        if job.state is JobState.WAITING:
            text += f"; waits for {job.parents_left} of them to end"
        lines.append(("parents", text))
    if family.children:
        lines.append(("children", _relatives(family.children, more, color=color)))
    if family.spawned_by is not None:
        lines.append(("spawned by", _relatives([family.spawned_by], more, color=color)))
    if family.spawned:
        lines.append(("spawned", _relatives(family.spawned, more, color=color)))
    return lines


def _relatives(relatives: Sequence[tuple[int, JobState]], more: str, *, color: bool) -> str:
    named = ", ".join(
        f"{job_id} {state_colors.painted(state, color=color)}"
        for job_id, state in relatives[:_RELATIVES_SHOWN]
    )
    return named + (more if len(relatives) > _RELATIVES_SHOWN else "")
