"""Commands about queues and limits: queues, pause, resume, limit, submit-limit."""

from __future__ import annotations

import argparse
import shlex
from collections import Counter
from collections.abc import Collection, Sequence

from taskq import errors
from taskq.broker.client import declarations
from taskq.broker.client.client import KEEP, Client, Keep
from taskq.broker.records import JobState, QueueStats, WorkerInfo
from taskq.cli import command, connection, output, values


def add_commands(commands: command.Commands) -> None:
    """Register the queue commands."""
    command.add(
        commands,
        "queues",
        cmd_queues,
        help="every queue: job counts per state, paused or not, limits, live workers",
        json=True,
    )
    for name, handler, text in (
        ("pause", cmd_pause, "pause a queue: workers claim none of its jobs until resumed"),
        ("resume", cmd_resume, "resume a paused queue"),
    ):
        parser = command.add(commands, name, handler, help=text)
        parser.add_argument("queue", help="queue name: one with jobs or settings, or --create")
        parser.add_argument(
            "--create",
            action="store_true",
            help=f"{name} a queue that has no jobs yet (without it, an unknown name is an error)",
        )

    limit = command.add(
        commands,
        "limit",
        cmd_limit,
        help="show or set a queue's cluster-wide limits",
        description="Show or set a queue's limits, applied by every worker's claim.\n\n"
        "  taskq limit images                        # show them\n"
        "  taskq limit images --max-running 4        # at most 4 of its jobs at once\n"
        "  taskq limit images --rate 100/1s          # 100 starts a second, in bursts of 100\n"
        "  taskq limit images --max-running none --rate none   # lift both",
        json=True,
    )
    limit.add_argument("queue", help="queue name: one with jobs or settings, or --create")
    limit.add_argument(
        "--create",
        action="store_true",
        help="limit a queue that has no jobs yet (without it, an unknown name is an error)",
    )
    limit.add_argument(
        "--max-running",
        type=values.max_running,
        default=argparse.SUPPRESS,
        metavar="N|none",
        help="at most N of the queue's jobs running at once, cluster-wide",
    )
    limit.add_argument(
        "--rate",
        type=values.rate_or_none,
        default=argparse.SUPPRESS,
        metavar="N/PERIOD|none",
        # Said as it is: one who limits calls to an API reads "at most N per period" as
        # a sliding window, which a bucket that starts full does not keep.
        help="a token bucket of N job starts, refilled at N per period: a burst of N, then "
        "N per period, so any one period may see up to 2N-1; e.g. 100/1s, 1000/1m",
    )

    submit_limit = command.add(
        commands,
        "submit-limit",
        cmd_submit_limit,
        help="list, set or remove submitters' submission rates",
        description="List, set or remove submitters' submission rates. Over its rate, a submit\n"
        "fails with an error that says when to retry, and nothing is written.\n\n"
        "  taskq submit-limit                        # list them\n"
        "  taskq submit-limit alice@lab1 1000/1m     # alice: 1000 jobs a minute\n"
        "  taskq submit-limit '*' 100/1s             # everyone without a limit of their own\n"
        "  taskq submit-limit alice@lab1 --remove",
        json=True,
    )
    submit_limit.add_argument(
        "submitter", nargs="?", help="user@host as jobs record it, or '*' for everyone else"
    )
    submit_limit.add_argument(
        "rate", nargs="?", type=values.rate, metavar="N/PERIOD", help="e.g. 1000/1m"
    )
    submit_limit.add_argument("--remove", action="store_true", help="lift the submitter's limit")


def _counts_row(stats: QueueStats) -> list[object]:
    return [stats.counts.get(state, 0) for state in JobState]


def _limits_text(stats: QueueStats | None) -> tuple[str, str]:
    if stats is None:
        return "-", "-"
    running = "-" if stats.max_running is None else str(stats.max_running)
    rate = "-"
    if stats.rate_limit is not None and stats.rate_period is not None:
        rate = values.format_rate(stats.rate_limit, stats.rate_period)
    return running, rate


def _workers_serving(workers: Sequence[WorkerInfo], served: Collection[str]) -> Counter[str]:
    """How many live workers take jobs from each queue. Live as the store counts them
    (``served``: the queues it counts as served, by heartbeats on its own clock, which this
    machine's may be off from), in a state it counts: active, or draining its jobs."""
    return Counter(
        queue
        for worker in workers
        if worker.state in {"active", "draining"}
        for queue in worker.queues
        if queue in served
    )


def cmd_queues(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        queues = client.stats()
        served = client.served_queues()
        serving = _workers_serving(client.workers(), served)
    if args.json:
        # "unserved": queued jobs that no live worker takes; "workers": how many live ones do.
        output.print_json(
            [
                {
                    **output.plain(stats),
                    "unserved": declarations.queue_unserved(stats, served),
                    "workers": serving[stats.queue],
                }
                for stats in queues
            ]
        )
        return command.EXIT_OK
    if not queues:
        print("no queues")
        return command.EXIT_OK
    header = ("QUEUE", "PAUSED", *(state.value.upper() for state in JobState))
    output.print_table(
        (*header, "MAX RUNNING", "RATE", "WORKERS"),
        [
            (
                stats.queue,
                "paused" if stats.paused else "-",
                *_counts_row(stats),
                *_limits_text(stats),
                # Shouted where jobs wait for a worker that is not there.
                "NONE LIVE" if declarations.queue_unserved(stats, served) else serving[stats.queue],
            )
            for stats in queues
        ],
    )
    return command.EXIT_OK


def cmd_pause(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        client.pause(args.queue, create=args.create)
    print(
        f"queue {args.queue} paused: no worker takes its jobs until "
        f"'taskq resume {shlex.quote(args.queue)}'"
    )
    return command.EXIT_OK


def cmd_resume(args: argparse.Namespace) -> int:
    with connection.client(args) as client:
        client.resume(args.queue, create=args.create)
    print(f"queue {args.queue} resumed")
    return command.EXIT_OK


def _queue(client: Client, name: str) -> QueueStats | None:
    return next((q for q in client.stats() if q.queue == name), None)


def _rate_of(stats: QueueStats | None) -> values.Rate | None:
    if stats is None or stats.rate_limit is None or stats.rate_period is None:
        return None
    return values.Rate(stats.rate_limit, stats.rate_period)


def cmd_limit(args: argparse.Namespace) -> int:
    # Options left out are absent from args (SUPPRESS); "none" is given, as None.
    given = vars(args)
    setting = "max_running" in given or "rate" in given
    with connection.client(args, read_only=not setting) as client:
        if setting:
            # A limit not named on the command line stays as the store has it.
            rate: values.Rate | None = given.get("rate")
            rate_limit: float | Keep | None = KEEP
            if "rate" in given:
                rate_limit = rate.count if rate else None
            client.set_queue_limits(
                args.queue,
                max_running=given.get("max_running", KEEP),
                rate_limit=rate_limit,
                rate_period=rate.period if rate else 1.0,
                create=args.create,
            )
        current = _queue(client, args.queue)
    if current is None and not setting:
        raise errors.QueueNotFound(f"no queue named {args.queue!r}: it has no jobs and no settings")
    if args.json:
        rate = _rate_of(current)
        output.print_json(
            {
                "queue": args.queue,
                "max_running": current.max_running if current else None,
                "rate_limit": rate.count if rate else None,
                "rate_period": rate.period if rate else None,
            }
        )
        return command.EXIT_OK
    running, rate_text = _limits_text(current)
    print(f"queue {args.queue}: max running {running}, rate {rate_text}")
    return command.EXIT_OK


def cmd_submit_limit(args: argparse.Namespace) -> int:
    if args.remove and (args.submitter is None or args.rate is not None):
        raise errors.ConfigError("--remove takes a submitter and no rate")
    if args.submitter is not None and args.rate is None and not args.remove:
        raise errors.ConfigError(f"give a rate for {args.submitter!r} (e.g. 1000/1m) or --remove")
    with connection.client(args, read_only=args.submitter is None) as client:
        if args.remove:
            client.remove_submit_limit(args.submitter)
        elif args.submitter is not None:
            client.set_submit_limit(args.submitter, args.rate.count, args.rate.period)
        limits = client.submit_limits()
    if args.json:
        output.print_json(limits)
    elif args.remove:
        print(f"submitter {args.submitter}: no limit of its own")
    elif args.submitter is not None:
        print(f"submitter {args.submitter}: at most {args.rate}")
    elif not limits:
        print("no submit limits")
    else:
        output.print_table(
            ("SUBMITTER", "RATE"),
            [(limit.submitter, values.format_rate(limit.rate, limit.period)) for limit in limits],
        )
    return command.EXIT_OK
