"""The ``taskq-worker`` command: run jobs from the store on this machine.

SIGTERM or Ctrl-C drains (no new claims; running jobs get the grace period,
then are handed back without using up an attempt); a second signal stops at
once, still handing jobs back.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from taskq import __version__, errors
from taskq.config import load_config
from taskq.worker.cpus import pin_process
from taskq.worker.module_check import ModuleCheck
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.settings import ISOLATION_MODES, LOG_FORMATS, settings_from

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
        "(default: 256, or four times the concurrency if more; 0: never)",
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
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    return parser


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
        module_check = ModuleCheck(
            settings.modules,
            import_path=sys.path,
            env=job_environment(os.environ, settings.env_passthrough),
        )
        # Imported while the modules are being imported in the check's child: the
        # event loop, the store drivers and the worker's loop take about as long.
        from taskq.worker import serving

        module_check.wait()
    except errors.ConfigError as exc:
        print(f"taskq-worker: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if settings.cpus is not None:
        pin_process(settings.cpus)
    return serving.serve(args.store or config.store_url, settings, log_format=args.log_format)


if __name__ == "__main__":
    sys.exit(main())
