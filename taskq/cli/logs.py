"""``taskq logs``: a job's attempts, or its output, followed live as ``tail -f`` would.

``taskq logs ID`` tells each attempt (worker, times, outcome, error, the end
of its output); ``--attempt N`` prints that attempt's output as stored; and
``-f`` follows the output as the job writes it, from any machine that
reaches the store, until the job ends, then tells how it ended. The job's
output goes to stdout as it was written; taskq's own notes (output dropped,
an attempt's end) go to stderr.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import msgspec

from taskq.broker.client.client import Client
from taskq.broker.records import (
    FINISHED_STATES,
    HANDED_BACK_ERROR,
    AttemptEnded,
    Execution,
    Job,
    JobState,
    OutputDropped,
    OutputEvent,
    OutputText,
)
from taskq.cli import command, connection, jobs, output, values

# A job claimed ahead of a free slot waits for one: worth a word once it is noticeable.
_WAIT_WORTH_SAYING_SECONDS = 0.1


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq logs``."""
    logs = command.add(
        commands,
        "logs",
        cmd_logs,
        help="a job's attempts (worker, times, outcome, error, log tail), or its output; "
        "-f follows it live",
        description="Tell a job's attempts: worker, times, outcome, exit, memory, CPU, error "
        "and the end of each one's output. With --attempt, print that attempt's output; "
        "with -f, follow the output as the job writes it until the job ends, then tell "
        "how it ended (exit 0 when it succeeded, 1 otherwise).\n\n"
        "  taskq logs 42                # every attempt, with the end of its output\n"
        "  taskq logs -f 42             # the latest attempt's output, live, then the next\n"
        "  taskq logs 42 --attempt 1    # the first attempt's output, as stored",
        json=True,
    )
    logs.add_argument("id", type=command.a_job_id, help="job id")
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="print the output as it comes until the job ends (Ctrl-C stops following)",
    )
    logs.add_argument(
        "--attempt",
        type=values.attempt_number,
        metavar="N",
        help="this attempt's output (with -f: from this attempt on; default: the latest)",
    )


def cmd_logs(args: argparse.Namespace) -> int:
    if args.follow or args.attempt is not None:
        return _print_output(args)
    with connection.client(args, read_only=True) as client, jobs.known(args.id):
        job = client.get(args.id)
        attempts = client.executions(args.id)
    if args.json:
        output.print_json(attempts)
        return command.EXIT_OK
    if not attempts:
        if job.state in FINISHED_STATES:
            print(_ended_unrun(job.id, job.state, job.error))
        else:
            print(f"job {job.id} is {job.state.value} and has no attempts yet")
        return command.EXIT_OK
    for index, attempt in enumerate(attempts):
        if index:
            print()
        _print_attempt(attempt, _limit_then(attempt, job))
    return command.EXIT_OK


def _ended_unrun(job_id: int, state: JobState, error: dict[str, Any] | None) -> str:
    """A job that ended without an attempt (a parent's end cancelled it, a cancel while
    queued), and why: "no attempts yet" would promise one that only a retry can bring."""
    why = output.why_ended(error)
    return f"job {job_id} ended {state.value} before it ran" + (f": {why}" if why else "")


def _limit_then(attempt: Execution, job: Job) -> int | None:
    """The attempt's limit when it ran, where the store tells it; None where it does not.

    An attempt does not store its limit, and a retry by hand raises the job's to one
    past the attempts made then: earlier attempts may have run under a lower one.
    Two cases are certain: an attempt numbered as the limit ran under it (its limit
    then was at least its number, and a limit only rises), and a limit more than one
    past the attempts made was never raised.
    """
    limit = job.max_attempts
    return limit if attempt.attempt == limit or limit > job.attempts + 1 else None


# An attempt a worker gave back (a drain, a job claimed ahead, a function it may not run).
_RELEASED = "released"
# How the reason of a worker's hand-back begins on its record ("handed back: the worker
# is draining; killed"), said after "handed back by its worker" without it.
_HANDED_BACK_WORDS = "handed back: "
# An attempt whose worker went silent: it ended when maintenance found its lease run out.
_LEASE_EXPIRED = "lease_expired"


def _print_attempt(attempt: Execution, max_attempts: int | None) -> None:
    took = attempt.finished_at - attempt.started_at if attempt.finished_at is not None else None
    ended = output.local_time(attempt.finished_at) if attempt.finished_at else "still running"
    outcome = attempt.outcome or "running"
    if outcome == _RELEASED:
        # Its number is used again by the next attempt: say why there are two.
        outcome += " (handed back unrun or unfinished: not counted)"
    of = f" of {max_attempts}" if max_attempts is not None else ""
    print(f"attempt {attempt.attempt}{of}  {outcome}  worker {attempt.worker_id}")
    facts = [f"{output.local_time(attempt.started_at)} -> {ended}"]
    if took is not None and outcome == _LEASE_EXPIRED:
        # When the job itself stopped nobody reported: "took" would be the lease's length.
        facts.append(f"no report: its lease ran out {output.duration(took)} after it began")
    elif took is not None:
        facts.append(f"took {output.duration(took)}")
    waited = attempt.started_at - attempt.claimed_at if attempt.claimed_at is not None else 0.0
    if attempt.finished_at is not None and waited >= _WAIT_WORTH_SAYING_SECONDS:
        facts.append(f"waited {output.duration(waited)} for a slot after its claim")
    if attempt.exit_code is not None:
        facts.append(f"exit code {attempt.exit_code}")
    if attempt.signal is not None:
        facts.append(f"signal {_signal_name(attempt.signal)}")
    if attempt.peak_rss_bytes is not None:
        facts.append(f"peak memory {output.size(attempt.peak_rss_bytes)}")
    if attempt.cpu_seconds is not None:
        facts.append(f"CPU {output.duration(attempt.cpu_seconds)}")
    print("  " + ", ".join(facts))
    if attempt.error:
        print(f"  error: {output.error_line(attempt.error)}")
    if attempt.log_tail:
        print("  log tail:")
        for line in attempt.log_tail.rstrip("\n").splitlines():
            print(f"    {line}")


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)


def _print_output(args: argparse.Namespace) -> int:
    """Print the job's output as stored (following it with ``-f``); the exit code."""
    with connection.client(args, read_only=True) as client, jobs.known(args.id):
        printer = _OutputPrinter(args.id, as_json=args.json)
        if args.follow and not args.json:
            _say_if_nobody_serves(client, args.id)
        if args.attempt is not None and not args.json:
            _say_if_handed_back(client, args.id, args.attempt)
        for event in client.output(args.id, attempt=args.attempt, follow=args.follow):
            printer.show(event)
    return printer.exit_code


def _say_if_nobody_serves(client: Client, job_id: int) -> None:
    """Before waiting on a job yet to start: say so when no live worker takes its queue,
    or following it would wait in silence for a worker that is not coming."""
    job = client.get(job_id)
    if job.state in {JobState.QUEUED, JobState.WAITING} and job.queue not in client.served_queues():
        output.warn(
            f"[taskq: job {job_id} is {job.state.value} in queue {job.queue!r}, which no live "
            "worker takes; waiting for one]"
        )


def _say_if_handed_back(client: Client, job_id: int, number: int) -> None:
    """Before an attempt's output: say when workers handed that attempt back before it ran
    to its end, each time under the same number, for only the last is printed."""
    same = [e for e in client.executions(job_id) if e.attempt == number]
    handed_back = sum(1 for e in same[:-1] if e.outcome == _RELEASED)
    if handed_back:
        times = "once" if handed_back == 1 else f"{handed_back} times"
        output.warn(
            f"[taskq: attempt {number} of job {job_id} was handed back by its worker {times} "
            f"before, not counted; this is its last run (taskq logs {job_id} shows the end "
            "of each)]"
        )


class _OutputPrinter:
    """Prints output pieces as they come: text to stdout, taskq's notes to stderr."""

    def __init__(self, job_id: int, *, as_json: bool) -> None:
        self._job_id = job_id
        self._as_json = as_json
        self._line_open = False  # the text printed last did not end its line
        self._ran = False  # an attempt was told
        self.exit_code = command.EXIT_OK

    def show(self, event: OutputEvent) -> None:
        if self._as_json:
            # One JSON object a line, as they come: a reader need not wait for the end.
            sys.stdout.write(msgspec.json.encode(event).decode() + "\n")
        elif isinstance(event, OutputText):
            sys.stdout.write(event.text)
            self._line_open = not event.text.endswith("\n")
        elif isinstance(event, OutputDropped):
            self._note(f"[taskq: {output.size(event.size)} of output dropped]")
        elif self._unrun(event):
            # Said as the plain form says it: there is no output for the note to stand apart from.
            self._note(_ended_unrun(self._job_id, event.job_state, event.error))
        else:
            self._note(_ending(event))
        sys.stdout.flush()
        if isinstance(event, AttemptEnded) and event.job_state in FINISHED_STATES:
            # Of a job that never ran, its one line is all there is to tell, and the plain
            # form tells it with exit 0: the follow does the same.
            failed = event.job_state is not JobState.SUCCEEDED and not self._unrun(event)
            self.exit_code = command.EXIT_ERROR if failed else command.EXIT_OK
        if isinstance(event, AttemptEnded) and event.attempt is not None:
            self._ran = True

    def _unrun(self, event: AttemptEnded) -> bool:
        """Whether ``event`` ends a job that ended before any attempt."""
        return event.attempt is None and not self._ran and event.job_state in FINISHED_STATES

    def _note(self, text: str) -> None:
        if self._line_open:
            sys.stdout.write("\n")
            self._line_open = False
        sys.stdout.flush()
        output.warn(text)


def _why_handed_back(event: AttemptEnded) -> str:
    """Why a worker handed the run back, as its record keeps it, to follow "handed back
    by its worker": `` (the worker is draining; killed)``; empty where the record says
    nothing (hand-backs stored before they kept why)."""
    error = event.error or {}
    message = str(error.get("message", ""))
    if error.get("type") != HANDED_BACK_ERROR or not message:
        return ""  # another error (a function this worker may not run) is said as errors are
    return f" ({message.removeprefix(_HANDED_BACK_WORDS)})"


def _ending(event: AttemptEnded) -> str:
    """How an attempt (or the job) ended, as one line."""
    error = output.error_line(event.error)
    said = f": {error}" if error else ""
    if event.attempt is None:
        return f"[taskq: the job's state: {event.job_state}{said}]"
    # A run after hand-backs is named too: its attempt's number was told before.
    attempt = f"attempt {event.attempt}" + (f" (run {event.run})" if event.run > 1 else "")
    if event.outcome == _RELEASED:
        # A hand-back uses no attempt: the next run takes the same number again.
        why = _why_handed_back(event)
        ended = f"{attempt} was handed back by its worker{why}, not counted{'' if why else said}"
        next_number = event.attempt
    else:
        ended = f"{attempt} ended {event.outcome}{said}"
        next_number = event.attempt + 1
    state = f"the job's state: {event.job_state}"
    if event.job_state is JobState.QUEUED:
        state += f", to run as attempt {next_number}"
    return f"[taskq: {ended}; {state}]"
