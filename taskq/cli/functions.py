"""``taskq functions``: the jobs workers have declared, their signatures, queues and workers."""

from __future__ import annotations

import argparse

from taskq.cli import command, connection, output


def add_commands(commands: command.Commands) -> None:
    """Register the functions command."""
    command.add(
        commands,
        "functions",
        cmd_functions,
        help="the jobs workers declare (@taskq.job): signature, queue, the live workers serving it",
        description="The jobs the workers' --modules declare with @taskq.job, as the newest "
        "version a live worker serves declares them: what 'taskq submit pkg.mod:func' checks "
        "its arguments against and takes its options from.",
        json=True,
    )


def cmd_functions(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        functions = client.functions()
    if args.json:
        output.print_json(functions)
        return command.EXIT_OK
    if not functions:
        print("no declared jobs: a worker publishes those of its --modules when it starts")
        return command.EXIT_OK
    output.print_table(
        ("SIGNATURE", "QUEUE", "WORKERS", "DOC"),
        [
            (
                function.signature,
                function.queue,
                ", ".join(function.workers) or "none live",
                output.one_line(function.doc) if function.doc else "-",
            )
            for function in functions
        ],
    )
    return command.EXIT_OK
