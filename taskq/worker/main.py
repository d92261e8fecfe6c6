"""The ``taskq-worker`` command: run jobs from the store on this machine.

SIGTERM or Ctrl-C drains (no new claims; running jobs get the grace period,
then are handed back without using up an attempt); a second signal stops at
once, still handing jobs back.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from taskq import __version__, errors
from taskq.broker.stores.store_url import resolve_store_url
from taskq.config import load_config
from taskq.one_line_parser import OneLineParser
from taskq.worker import module_check
from taskq.worker.cpus import pin_process
from taskq.worker.events import EventLog
from taskq.worker.first_children import FirstChildren
from taskq.worker.settings import LOG_FORMATS, setting_flags, settings_from
from taskq.worker.start_turns import StartTurn

if TYPE_CHECKING:
    from taskq.broker.ops.functions import Declaration

EXIT_ERROR = 1
EXIT_CONFIG = 2
# Said of each flag that takes a list: a second one adds, and the flags replace the file's.
REPEATED = "repeat it to add more: the flags' list replaces the config file's"
STOPPING = """\
stopping:
  Ctrl-C or SIGTERM drains: no new claims; running jobs get the grace period
  (grace_seconds in the config's [worker] section, 30 by default) to finish,
  then go back to the queue without using up an attempt. A second Ctrl-C or
  SIGTERM hands them back at once."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="taskq-worker",
        description="Run taskq jobs on this machine.",
        epilog=STOPPING,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"taskq-worker {__version__}")
    parser.add_argument("--store", help="store URL (default: TASKQ_STORE, config, user data dir)")
    parser.add_argument("--config", help="config file (default: TASKQ_CONFIG or the user one)")
    # The worker's settings, each as declared on WorkerSettings.
    for setting in setting_flags():
        flag = setting.flag
        if setting.switch:
            # None, not False, when absent: the config file's value stands.
            parser.add_argument(setting.option, action="store_true", default=None, help=flag.help)
        elif setting.listed:
            # Given again, it adds to the list, as `taskq submit --label` does (flag_values).
            parser.add_argument(
                setting.option,
                action="append",
                type=flag.parse,
                metavar=flag.metavar,
                help=f"{flag.help}; {REPEATED}",
            )
        else:
            parser.add_argument(
                setting.option,
                type=flag.parse,
                metavar=flag.metavar,
                choices=flag.choices,
                help=flag.help,
            )
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    return parser


def flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (None: not given), in the config file's words: a list
    flag's values joined, in the order given (``--queues a --queues b`` is ``a,b``)."""
    values: dict[str, Any] = {}
    for setting in setting_flags():
        given = getattr(args, setting.setting)
        values[setting.setting] = ",".join(given) if setting.listed and given else given
    return values


def main(argv: Sequence[str] | None = None) -> int:
    # What the start allocates lives as long as the worker (its modules, its
    # settings): collecting cycles meanwhile finds none, and took 5% of the
    # CPU of its imports. The command's entry (``launch``) turns it off before
    # them; this, for ``python -m`` and callers in-process. ``serving.serve``
    # turns collection back on.
    gc.disable()
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        settings = settings_from(config.worker, flag_values(args))
        settings.check_runs_something()
    except errors.ConfigError as exc:
        return _config_error(exc)
    # The order of every taskq process: --store, then TASKQ_STORE, then the config file's.
    store_url = resolve_store_url(args.store, config.store_url)
    # Before pinning: the turns are as many as the machine's CPUs allow.
    turn = StartTurn.take(store_url or "")
    if settings.cpus is not None:
        pin_process(settings.cpus)  # first: the children inherit it
    # The children start while the worker imports the rest of itself (its event
    # loop, the store's drivers, its roles): both are on the way to the first job.
    try:
        children = FirstChildren(settings, turn)
    except OSError as exc:
        turn.give_back()
        print(f"taskq-worker: error: cannot start a sandbox child: {exc}", file=sys.stderr)
        return EXIT_ERROR
    opened = None
    try:
        from taskq.worker import serving

        opened = serving.open_at_once(store_url)
        declarations = children.module_check.wait()
    except BaseException as exc:
        children.close()
        if opened is not None:
            opened.close()
        if isinstance(exc, errors.ConfigError):
            return _config_error(exc)
        raise
    if args.queues is None and "queues" not in config.worker:
        _warn_of_queues_left(declarations, settings.queues, args.log_format)
    return serving.serve(
        store_url,
        settings,
        children,
        log_format=args.log_format,
        declarations=declarations,
        opened=opened,
    )


def _warn_of_queues_left(
    declarations: Sequence[Declaration], queues: Sequence[str], log_format: str
) -> None:
    """Say, once, which queues of the modules' declared jobs a worker left to its default
    queues does not take: started so, a newcomer's jobs there would wait for no one."""
    left = module_check.undeclared_queues(declarations, queues)
    if left:
        wanted = ",".join([*queues, *left])
        EventLog(format=log_format).emit(
            "queues_not_taken",
            queues=",".join(left),
            serves=",".join(queues),
            hint=f"its modules declare jobs on these queues too: add --queues {wanted}",
        )


def _config_error(exc: errors.ConfigError) -> int:
    print(f"taskq-worker: error: {exc}", file=sys.stderr)
    return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
