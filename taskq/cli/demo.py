"""``taskq demo``: a newcomer's first look at taskq working, on the embedded store or a cluster.

It starts workers in the background, submits a batch of sample jobs from
:mod:`taskq.demo_jobs` (most succeed quickly, a few fail and succeed on a
retry, one hits its memory limit and ends dead), shows their progress live,
prints a summary, stops the workers by pid (also on Ctrl-C or failure), and
says how to look around. The jobs go to a queue of their own, so they never
mix with the user's.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from taskq import errors
from taskq.broker.client.client import Client, JobQuery, call_spec, default_submitter
from taskq.broker.records import Job, JobSpec, JobState
from taskq.broker.stores.store_url import STORE_ENV, mask_password
from taskq.cli import command, connection, output, values
from taskq.dev.local_cluster import LocalCluster
from taskq.dev.workers import WorkerFleet

DEMO_QUEUE = "taskq-demo"
SLOTS_PER_WORKER = 4
MEMORY_LIMIT = "256MiB"
# How the progress is shown: in place on a terminal, else a line now and then.
_TTY_POLL_SECONDS = 0.2
_LOG_POLL_SECONDS = 0.5
_LOG_LINE_SECONDS = 2.0
_BAR_WIDTH = 24
_SHOWN_STATES = ("queued", "running", "retrying", "succeeded", "failed", "dead", "cancelled")
_ALWAYS_SHOWN = {"queued", "running", "succeeded"}


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq demo``."""
    demo = command.add(
        commands,
        "demo",
        cmd_demo,
        help="see taskq at work: workers, a batch of sample jobs, live progress, a summary",
        description="See taskq at work. Starts workers in the background, submits sample jobs\n"
        f"to the queue {DEMO_QUEUE} (most succeed quickly, a few fail and succeed on a retry,\n"
        "one hits its memory limit and ends dead), shows their progress, prints a summary,\n"
        "stops the workers, and says how to open the console on the same store.\n\n"
        "  taskq demo                 # the embedded store: nothing to start\n"
        "  taskq demo --cluster       # the local 3-node rqlite cluster (taskq dev cluster)",
    )
    demo.add_argument(
        "--jobs", type=values.count, default=40, help="how many sample jobs (default 40)"
    )
    demo.add_argument(
        "--workers", type=values.count, default=2, help="how many workers (default 2)"
    )
    demo.add_argument(
        "--cluster",
        action="store_true",
        help="use the local rqlite cluster of 'taskq dev cluster', started if not running",
    )
    demo.add_argument(
        "--timeout",
        type=values.seconds,
        default=values.seconds("5m"),
        metavar="DURATION",
        help="give up (and stop the workers) after this long (default 5m)",
    )


def sample_jobs(count: int, marker_dir: Path, *, submitter: str) -> list[JobSpec]:
    """The demo's batch: quick jobs, a flaky one in ten, and one memory hog in the middle."""

    def job(target: str, args: list[object], **options: Any) -> JobSpec:
        return call_spec(
            f"taskq.demo_jobs:{target}", args, queue=DEMO_QUEUE, submitter=submitter, **options
        )

    rng = random.Random()
    hog_at = count // 2 if count >= 3 else None
    specs = []
    for index in range(count):
        if index == hog_at:
            specs.append(job("hog", [16], max_attempts=2, limits={"memory_bytes": MEMORY_LIMIT}))
        elif index % 10 == 3:
            marker = marker_dir / f"flaky-{index}"
            specs.append(job("flaky", [str(marker), 1 + (index // 10) % 2], max_attempts=3))
        else:
            seconds = round(rng.uniform(0.2, 1.2), 2)
            specs.append(job("crunch", [1000 * (index + 1), seconds], max_attempts=3))
    return specs


def shown_state(job: Job) -> str:
    """The state to count a job under: a queued job that has run before is retrying."""
    if job.state is JobState.QUEUED and job.attempts > 0:
        return "retrying"
    return job.state.value


def tally(jobs: Sequence[Job]) -> dict[str, int]:
    """How many jobs are in each shown state."""
    counts = dict.fromkeys(_SHOWN_STATES, 0)
    for job in jobs:
        counts[shown_state(job)] += 1
    return counts


def progress_line(counts: dict[str, int], total: int, elapsed: float) -> str:
    """``[#####---] 12/40 finished  queued 20  running 8  succeeded 12  3.4s``."""
    done = sum(counts[state.value] for state in JobState if state.finished)
    filled = round(_BAR_WIDTH * done / total) if total else _BAR_WIDTH
    bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
    parts = "  ".join(
        f"{name} {counts[name]}" for name in _SHOWN_STATES if counts[name] or name in _ALWAYS_SHOWN
    )
    return f"[{bar}] {done}/{total} finished  {parts}  {elapsed:.1f}s"


def _current(client: Client, ids: Sequence[int]) -> list[Job]:
    wanted = set(ids)
    listed = client.list(JobQuery(queue=DEMO_QUEUE, before=max(ids) + 1, limit=len(ids)))
    found = {job.id: job for job in listed if job.id in wanted}
    # Jobs someone else submitted to the demo queue meanwhile may crowd ours out of the page.
    for job_id in sorted(wanted - found.keys()):
        with suppress(errors.JobNotFound):
            found[job_id] = client.get(job_id)
    return [found[job_id] for job_id in ids if job_id in found]


def _watch(client: Client, ids: Sequence[int], workers: WorkerFleet, timeout: float) -> list[Job]:
    """Show progress until every job has finished; raise if the workers die or time runs out."""
    tty = sys.stdout.isatty()
    started = time.monotonic()
    last_counts: dict[str, int] = {}
    last_shown = 0.0
    while True:
        jobs = _current(client, ids)
        elapsed = time.monotonic() - started
        counts = tally(jobs)
        finished = len(jobs) == len(ids) and all(job.state.finished for job in jobs)
        line = progress_line(counts, len(ids), elapsed)
        if tty:
            sys.stdout.write("\r\x1b[K" + line + ("\n" if finished else ""))
            sys.stdout.flush()
        elif finished or (counts != last_counts and elapsed - last_shown >= _LOG_LINE_SECONDS):
            print(line, flush=True)
            last_counts, last_shown = counts, elapsed
        if finished:
            return jobs
        if not workers.running():
            raise errors.TaskqError(
                "the demo's workers exited before the jobs finished; their logs end:\n"
                + workers.describe(lines=5)
            )
        if elapsed > timeout:
            raise errors.TaskqError(
                f"the demo's jobs did not finish within {output.duration(timeout)}"
            )
        time.sleep(_TTY_POLL_SECONDS if tty else _LOG_POLL_SECONDS)


@contextmanager
def _ctrl_c_after_the_submit() -> Iterator[None]:
    """Hold a Ctrl-C that comes while the batch is submitted until the submit has returned.

    The batch may be written before its ids come back (a write commits on the
    store's own thread): interrupted then, the demo would not know which jobs to
    cancel and would leave them all queued. An ignored SIGINT stays ignored.
    """
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _cancel_unfinished(client: Client, ids: Sequence[int]) -> None:
    """Leave nothing of an interrupted demo queued (best effort: the store may be the problem)."""
    try:
        client.cancel(*ids)
    except errors.StoreError as exc:
        output.warn(f"taskq: could not cancel the demo's unfinished jobs: {exc}")


def _outcome(job: Job) -> str:
    if job.state is JobState.SUCCEEDED:
        return "succeeded at once" if job.attempts <= 1 else "succeeded after retrying"
    return job.state.value


def _example(client: Client, job: Job) -> str:
    if job.state is JobState.SUCCEEDED and job.attempts <= 1:
        return f"job {job.id}: {output.call(job)} -> {output.compact_json(job.result)}"
    if job.state is JobState.SUCCEEDED:
        attempts = client.executions(job.id)
        failed = next((attempt for attempt in attempts if attempt.error), None)
        if failed is not None:
            return f"job {job.id}, attempt {failed.attempt}: {output.error_line(failed.error)}"
        return f"job {job.id}"
    error = job.error or {}
    why = output.error_line(error) or job.state.value
    if error.get("status") == "memory":
        why = f"{error.get('type') or 'MemoryError'} at its memory limit of {MEMORY_LIMIT}"
    return f"job {job.id}: {why}"


def summary_rows(client: Client, jobs: Sequence[Job]) -> list[tuple[str, int, int, str]]:
    """One row per outcome: how many jobs, how many attempts, an example."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(_outcome(job), []).append(job)
    order = ["succeeded at once", "succeeded after retrying", "dead", "failed", "cancelled"]
    names = sorted(groups, key=lambda name: order.index(name) if name in order else len(order))
    return [
        (
            name,
            len(groups[name]),
            sum(job.attempts for job in groups[name]),
            _example(client, groups[name][0]),
        )
        for name in names
    ]


def command_as_typed(name: str) -> str:
    """How to call this install's ``name`` (``taskq``, ``taskq-tui``) from the current shell.

    The bare name when PATH finds this install's; else its path (relative to
    the working directory when under it), as after ``scripts/taskq``, whose
    virtualenv is not on PATH.
    """
    own = Path(sys.executable).parent / name  # console scripts sit beside the interpreter
    if not own.is_file():
        return name
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == own.resolve():
        return name
    relative = os.path.relpath(own)
    return shlex.quote(str(own) if relative.startswith("..") else relative)


def _print_next_steps(url: str, jobs: Sequence[Job]) -> None:
    shown = mask_password(url)
    store = f"--store {shlex.quote(shown)}"
    taskq, tui = command_as_typed("taskq"), command_as_typed("taskq-tui")
    print()
    print("Look around (finished jobs are kept as taskq retention says, 7 days by default):")
    if shown != url:
        print("  (the store's password is hidden below: put it back, or set TASKQ_STORE)")
    print(f"  {taskq} {store} jobs --queue {DEMO_QUEUE}")
    dead = next((job for job in jobs if job.state is JobState.DEAD), None)
    if dead is not None:
        print(f"  {taskq} {store} logs {dead.id}      # the job that hit its memory limit")
    print(f"  {tui} {store}      # the live console")


def _mix(specs: Sequence[JobSpec]) -> str:
    """What the batch holds, in a sentence."""
    flaky = sum(spec.payload["target"].endswith(":flaky") for spec in specs)
    hogs = sum(spec.payload["target"].endswith(":hog") for spec in specs)
    parts = ["most succeed quickly"]
    if flaky:
        parts.append(f"flaky ones ({flaky}) fail once or twice, then succeed on a retry")
    if hogs:
        parts.append(f"one hits its memory limit of {MEMORY_LIMIT} and ends dead")
    return "; ".join(parts)


def _local_cluster_url() -> str:
    """The running local cluster's URL, starting one first when none runs."""
    cluster = LocalCluster()
    url = cluster.running_url()
    if url is not None:
        return url
    output.warn(
        f"taskq: no local cluster is running: starting one in {cluster.directory} "
        f"(stop it with: {cluster.command('stop')})"
    )
    return cluster.start(lambda message: output.warn(f"taskq: {message}"))


def _start_workers(workers: WorkerFleet, url: str, count: int, config: str | None) -> None:
    for index in range(1, count + 1):
        workers.start(
            url,
            tag=f"demo-{index}",
            args=(
                *("--queues", DEMO_QUEUE),
                *("--concurrency", str(SLOTS_PER_WORKER)),
                *("--modules", "taskq.demo_jobs"),
                *(("--config", config) if config else ()),
            ),
        )


def cmd_demo(args: argparse.Namespace) -> int:
    if args.cluster:
        if args.store is not None:
            raise errors.ConfigError("--cluster and --store both name a store: give one of them")
        url = _local_cluster_url()
    else:
        url = connection.store_url(args)
    work_dir = Path(tempfile.mkdtemp(prefix="taskq-demo-"))
    # The workers are told the store by --store; a TASKQ_STORE would only confuse a reader.
    worker_env = {key: value for key, value in os.environ.items() if key != STORE_ENV}
    finished = False
    try:
        with connection.opened_url(url) as store:
            client = Client(store=store)
            # The demo's own queue: make sure an earlier pause does not stall it.
            client.resume(DEMO_QUEUE, create=True)
            with WorkerFleet(work_dir, env=worker_env) as workers:
                _start_workers(workers, url, args.workers, args.config)
                specs = sample_jobs(args.jobs, work_dir, submitter=default_submitter())
                print(
                    f"taskq demo: {len(specs)} sample jobs on {mask_password(url)}, "
                    f"queue {DEMO_QUEUE}, "
                    f"{args.workers} worker(s) in the background "
                    f"(pids {', '.join(map(str, workers.pids))})"
                )
                print(_mix(specs))
                started = time.monotonic()
                ids: list[int] = []
                try:
                    with _ctrl_c_after_the_submit():
                        ids = [handle.id for handle in client.submit_many(specs)]
                    jobs = _watch(client, ids, workers, args.timeout)
                except BaseException:
                    output.warn("taskq: demo stopped: cancelling its jobs, stopping its workers")
                    _cancel_unfinished(client, ids)
                    raise
                took = time.monotonic() - started
            rows = summary_rows(client, jobs)
        print()
        output.print_table(("RESULT", "JOBS", "ATTEMPTS", "EXAMPLE"), rows, cell_width=90)
        print()
        print(
            f"all {len(jobs)} jobs finished in {output.duration(took)} "
            f"({sum(job.attempts for job in jobs)} attempts); the workers are stopped"
        )
        _print_next_steps(url, jobs)
        finished = True
    finally:
        if finished:
            shutil.rmtree(work_dir, ignore_errors=True)
        else:
            output.warn(f"taskq: the demo's worker logs are in {work_dir}")
    return command.EXIT_OK
