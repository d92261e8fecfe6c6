"""The ``taskq-worker`` command: run jobs from the store on this machine.

SIGTERM or Ctrl-C drains (no new claims; running jobs get the grace period,
then are handed back without using up an attempt); a second signal stops at
once, still handing jobs back.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Sequence

import anyio

from taskq import __version__, errors
from taskq.broker.connect import open_store
from taskq.config import load_config
from taskq.worker.cpus import pin_process
from taskq.worker.events import FORMATS, EventLog
from taskq.worker.module_check import check_modules
from taskq.worker.runtime import Worker
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.settings import ISOLATION_MODES, settings_from

EXIT_ERROR = 1
EXIT_CONFIG = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskq-worker", description="Run taskq jobs on this machine."
    )
    parser.add_argument("--version", action="version", version=f"taskq-worker {__version__}")
    parser.add_argument("--store", help="store URL (default: TASKQ_STORE, config, user data dir)")
    parser.add_argument("--config", help="config file (default: TASKQ_CONFIG or the user one)")
    parser.add_argument("--queues", help="comma-separated queues to take jobs from")
    parser.add_argument(
        "--modules",
        help="comma-separated modules or packages whose functions this worker runs "
        "(nothing else is run)",
    )
    parser.add_argument(
        "--allow-python-exec",
        action="store_true",
        default=None,
        help="also run python_exec jobs: code sent with the job (trusted submitters only)",
    )
    parser.add_argument(
        "--allow-shell",
        action="store_true",
        default=None,
        help="also run shell jobs: commands sent with the job (trusted submitters only)",
    )
    parser.add_argument("--concurrency", type=int, help="jobs at once (default: CPU count)")
    parser.add_argument(
        "--autoscale",
        metavar="MIN,MAX",
        help="keep between MIN and MAX slots, growing with the backlog and shrinking when "
        "idle (instead of --concurrency)",
    )
    parser.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="most memory the running jobs' limits may add up to, as in 6GiB "
        "(caps the slots at SIZE / max_limits.memory_bytes)",
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        help="most jobs claimed beyond the free slots while jobs are short "
        "(default: four times the concurrency; 0: never)",
    )
    parser.add_argument("--labels", help="comma-separated labels jobs may require")
    parser.add_argument(
        "--env-passthrough",
        metavar="NAMES",
        help="comma-separated variables (or patterns, as in OMP_*) of the worker's environment "
        "that jobs may see besides the base set",
    )
    parser.add_argument("--name", help="a name for this worker (default: host-pid)")
    parser.add_argument("--isolation", choices=ISOLATION_MODES, help="pool (default) or process")
    parser.add_argument(
        "--cpus", help="CPUs the worker and its jobs run on, as in 0-3,6 (default: any)"
    )
    parser.add_argument("--log-format", choices=FORMATS, default="text")
    return parser


async def _serve(worker: Worker) -> None:
    async with anyio.create_task_group() as tasks:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    if worker.draining.is_set():
                        worker.stop_now()
                    else:
                        worker.drain()

        tasks.start_soon(watch_signals)
        await worker.run()
        tasks.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        settings = settings_from(
            config.worker,
            {
                "queues": args.queues,
                "modules": args.modules,
                "concurrency": args.concurrency,
                "autoscale": args.autoscale,
                "memory_budget": args.memory_budget,
                "labels": args.labels,
                "env_passthrough": args.env_passthrough,
                "name": args.name,
                "isolation": args.isolation,
                "cpus": args.cpus,
                "prefetch": args.prefetch,
                "allow_python_exec": args.allow_python_exec,
                "allow_shell": args.allow_shell,
            },
        )
        settings.check_runs_something()
        check_modules(
            settings.modules,
            import_path=sys.path,
            env=job_environment(os.environ, settings.env_passthrough),
        )
    except errors.ConfigError as exc:
        print(f"taskq-worker: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if settings.cpus is not None:
        pin_process(settings.cpus)
    events = EventLog(format=args.log_format)
    try:
        store = open_store(args.store or config.store_url)
    except errors.ConfigError as exc:
        print(f"taskq-worker: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except errors.TaskqError as exc:
        print(f"taskq-worker: error: cannot use the store: {exc}", file=sys.stderr)
        return EXIT_ERROR
    _tune_garbage_collection()
    failure: errors.StoreError | None = None
    try:
        # uvloop: the loop's own work per job (callbacks, timers, fd watches)
        # costs a fraction of asyncio's, and a busy worker's main thread is
        # mostly that work.
        try:
            anyio.run(
                _serve,
                Worker(store, settings, events=events),
                backend_options={"use_uvloop": True},
            )
        finally:
            events.flush()  # the last lines, should the loop have ended before writing them
    except* errors.StoreError as group:
        # The worker's task groups wrap what stopped it (registering at
        # start-up, say, on a damaged file); the person wants the error itself.
        failure = _first_leaf(group)
    finally:
        store.close()
    if failure is not None:
        print(f"taskq-worker: error: cannot use the store: {failure}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _first_leaf(group: BaseExceptionGroup[errors.StoreError]) -> errors.StoreError:
    """The first exception in ``group``, however deeply groups nest."""
    first = group.exceptions[0]
    return first if not isinstance(first, BaseExceptionGroup) else _first_leaf(first)


def _tune_garbage_collection() -> None:
    """Collect cyclic garbage less often than Python's default, which suits small scripts.

    A busy worker allocates a few hundred objects per job, so the default
    (a young-generation pass every 700 allocations) ran every few jobs and
    cost 5-15% of the embedded drain's throughput. Everything imported
    so far lives as long as the process: frozen, later passes skip it.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


if __name__ == "__main__":
    sys.exit(main())
