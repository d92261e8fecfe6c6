"""The ``taskq`` command.

Errors are one clear line on stderr and a non-zero exit; every listing
takes ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from taskq import __version__, errors
from taskq.broker.connect import open_store
from taskq.broker.migrations import applied_versions
from taskq.broker.store import NodeInfo

EXIT_ERROR = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskq", description="taskq: a job queue on embedded SQLite or rqlite."
    )
    parser.add_argument("--version", action="version", version=f"taskq {__version__}")
    parser.add_argument(
        "--store",
        help="store URL (sqlite:///file.db or rqlite://host:port,...); "
        "default: TASKQ_STORE, the config file, then a file in your data directory",
    )
    parser.add_argument("--config", help="config file (default: TASKQ_CONFIG or the user one)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cluster = commands.add_parser(
        "cluster", help="show the store's nodes, leader, reachability and raft state"
    )
    cluster.add_argument("--json", action="store_true", help="print JSON")
    cluster.set_defaults(handler=cmd_cluster)
    return parser


def cmd_cluster(args: argparse.Namespace) -> int:
    store = open_store(args.store, config_path=args.config)
    try:
        nodes = store.nodes()
        schema_version = max(applied_versions(store), default=0)
    finally:
        store.close()
    if args.json:
        print(
            json.dumps(
                {
                    "store": store.url,
                    "schema_version": schema_version,
                    "nodes": [asdict(node) for node in nodes],
                },
                indent=2,
            )
        )
        return 0
    print(f"store   {store.url}")
    print(f"schema  version {schema_version}")
    _print_nodes(nodes)
    return 0 if any(node.leader for node in nodes) else EXIT_ERROR


def _print_nodes(nodes: Sequence[NodeInfo]) -> None:
    header = ("ID", "ADDRESS", "ROLE", "REACHABLE", "RAFT STATE", "VERSION")
    rows = [
        (
            node.id,
            node.address,
            "leader" if node.leader else ("voter" if node.voter else "non-voter"),
            "yes" if node.reachable else f"no {node.error}".strip(),
            node.raft_state,
            node.version,
        )
        for node in nodes
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    if not any(node.leader for node in nodes):
        print("no leader: the cluster cannot accept writes", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except errors.TaskqError as exc:
        print(f"taskq: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
