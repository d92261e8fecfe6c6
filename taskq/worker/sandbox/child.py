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

import argparse
import gc
import json
import math
import os
import socket
import sys

from taskq.worker.sandbox import keeper
from taskq.worker.sandbox.cgroups import CgroupPlan
from taskq.worker.sandbox.lease_deadline import read_shared


def main(argv: list[str] | None = None) -> None:
    """Serve the worker on the control socket in the given mode."""
    parser = argparse.ArgumentParser(prog="python -m taskq.worker.sandbox.child")
    parser.add_argument("mode", choices=["once", "pool", "exec"])
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--keeper-fd", type=int, required=True)
    parser.add_argument("--worker-pid", type=int, required=True)
    parser.add_argument("--deadline-fd", type=int, help="memfd of the worker's lease deadline")
    parser.add_argument("--cgroups", help="where the job's control groups go, as JSON")
    parser.add_argument("--ceiling", help="pool mode: the worker's maximum limits, as JSON")
    parser.add_argument("--marker", help="pool mode: the token of this child's output markers")
    parser.add_argument("--modules", help="pool mode: the worker's modules, to import at once")
    parser.add_argument("--import-path", help="pool mode: where to import them from, as JSON")
    parser.add_argument("--report-fd", type=int, help="pool mode: where to say how that went")
    args = parser.parse_args(argv)
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
