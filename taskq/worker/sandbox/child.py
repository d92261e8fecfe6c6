"""The sandbox child: ``python -u -m taskq.worker.sandbox.child MODE --control-fd N``.

The worker starts this in a new session with stdout and stderr on the
worker's output pipe, stdin on /dev/null, the control socket at fd N and the
keeper socket at another. It first splits into a keeper and a job process
(see ``keeper``); the job process reads ``job`` messages from the control
socket and answers with ``progress`` and ``result`` messages (see
``protocol``). Modes:

- ``once``: run one job under limits it cannot raise, report, exit.
- ``pool``: import the worker's modules (``--modules``; the first child
  says how that went on ``--report-fd``: see ``module_imports``), say
  ``ready``, then run jobs one after another until the socket closes,
  each under its own soft limits (see ``rlimits``). Each result carries
  the job's usage and whether it left a process running. Jobs sent while
  one runs wait their turn here; after a job that leaves the child
  unfit for more (out of memory, a process left running) the rest are
  answered ``withdrawn`` unrun, for the worker to run in a fresh child.
- ``exec``: apply the limits, then replace this process with a ``shell``
  payload's command, which thereby keeps the pid, process group and limits.

The split comes first, before the imports of what runs jobs
(``job_process``): the keeper needs little of it, and the job process
imports it while the keeper moves it into its control groups.

``-u`` keeps stdout and stderr unbuffered, so a job's last lines reach the
log even when it dies without flushing.
In ``once`` and ``pool`` modes the job's ``logging`` records from INFO up go
to stderr (``job_logging``), set up once before the first job.
"""

from __future__ import annotations

import gc
import json
import math
import os
import socket
import sys
from typing import NamedTuple

from taskq.worker.sandbox import keeper
from taskq.worker.sandbox.cgroups import CgroupPlan
from taskq.worker.sandbox.lease_deadline import read_shared


class Arguments(NamedTuple):
    """The child's command line, which only the worker writes (``ChildProcess.start``)."""

    mode: str
    control_fd: int
    keeper_fd: int
    worker_pid: int
    deadline_fd: int | None
    """memfd of the worker's lease deadline."""
    cgroups: str | None
    """Where the job's control groups go, as JSON."""
    ceiling: str | None
    """Pool mode: the worker's maximum limits, as JSON."""
    marker: str | None
    """Pool mode: the token of this child's output markers."""
    modules: str | None
    """Pool mode: the worker's modules, to import at once, comma-separated."""
    import_path: str | None
    """Pool mode: where to import them from, as JSON."""
    report_fd: int | None
    """Pool mode: where to say how that went."""


_MODES = ("once", "pool", "exec")
_NUMBERS = ("--control-fd", "--keeper-fd", "--worker-pid", "--deadline-fd", "--report-fd")
_TEXTS = ("--cgroups", "--ceiling", "--marker", "--modules", "--import-path")
_REQUIRED = ("--control-fd", "--keeper-fd", "--worker-pid")


def parse_arguments(argv: list[str]) -> Arguments:
    """``MODE --option value ...``, by hand: building argparse's parser for these
    eleven options took 5 ms of CPU at every child's start. Anything else is an
    error (``SystemExit``, status 2), as a child's command line is the worker's
    own."""
    if not argv or argv[0] not in _MODES:
        raise SystemExit(f"taskq child: the mode must be one of {', '.join(_MODES)}: {argv[:1]}")
    pairs = argv[1:]
    if len(pairs) % 2:
        raise SystemExit(f"taskq child: {pairs[-1]} has no value")
    given = dict(zip(pairs[::2], pairs[1::2], strict=True))
    unknown = sorted(set(given) - {*_NUMBERS, *_TEXTS})
    missing = [name for name in _REQUIRED if name not in given]
    if unknown or missing:
        raise SystemExit(f"taskq child: unknown options {unknown}, missing {missing}")
    numbers: dict[str, int | None] = {}
    for name in _NUMBERS:
        value = given.get(name)
        if value is not None and not value.isdigit():
            raise SystemExit(f"taskq child: {name} takes a number, not {value!r}")
        numbers[name] = None if value is None else int(value)
    return Arguments(
        mode=argv[0],
        control_fd=int(given["--control-fd"]),
        keeper_fd=int(given["--keeper-fd"]),
        worker_pid=int(given["--worker-pid"]),
        deadline_fd=numbers["--deadline-fd"],
        cgroups=given.get("--cgroups"),
        ceiling=given.get("--ceiling"),
        marker=given.get("--marker"),
        modules=given.get("--modules"),
        import_path=given.get("--import-path"),
        report_fd=numbers["--report-fd"],
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the worker on the control socket in the given mode."""
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    # The job's own subprocesses (and an exec'd command) must not inherit the channels.
    job_fds = [args.control_fd] + ([] if args.report_fd is None else [args.report_fd])
    for fd in [*job_fds, args.keeper_fd]:
        os.set_inheritable(fd, False)
    # A child woken by a job frame then waits for the worker to yield its CPU
    # instead of preempting it: the worker sends the frames of a whole batch
    # of claimed jobs before any child runs, and the job's own processes (which
    # inherit this) stay out of the way of the worker's heartbeats.
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    clock = keeper.split(
        keeper_fd=args.keeper_fd,
        worker_pid=args.worker_pid,
        kill_by=((lambda: math.inf) if args.deadline_fd is None else read_shared(args.deadline_fd)),
        job_fds=tuple(job_fds),
        cgroups=CgroupPlan.from_json(args.cgroups) if args.cgroups else None,
    )
    # The job process. What runs jobs is imported now, as the keeper moves this
    # process into its control groups, and not before the split: the keeper
    # would only have imported it too. Without collecting cycles meanwhile,
    # which finds none in modules and took 9% of the imports' CPU; frozen
    # then, so that the jobs' first collection does not walk them all (6 ms).
    # The jobs get the collector as Python sets it.
    gc.disable()
    from taskq.worker.sandbox import job_logging, job_process

    gc.freeze()
    gc.enable()
    clock.wait_until_contained()
    control = socket.socket(fileno=args.control_fd)
    if args.mode != "exec":
        # Once, before any job: a pool child's later jobs find it set up.
        job_logging.send_records_to_stderr()
    if args.mode == "pool":
        if args.ceiling is None or args.marker is None:
            raise SystemExit("taskq child: pool mode needs --ceiling and --marker")
        modules = args.modules.split(",") if args.modules else []
        import_path = json.loads(args.import_path) if args.import_path else sys.path
        job_process.serve_pool(
            control, clock, args.ceiling, args.marker, modules, import_path, args.report_fd
        )
    elif args.mode == "once":
        job_process.serve_once(control, clock)
    else:
        job_process.exec_command(control, clock)


if __name__ == "__main__":
    main()
