"""``taskq dev cluster ACTION``: a local rqlite cluster (and workers) for development.

The cluster is :class:`taskq.dev.local_cluster.LocalCluster`: its nodes and
workers run on after the command, and are found again through its directory.
``add``, ``remove`` and ``replace`` change the membership of the running
cluster (:mod:`taskq.dev.membership`) while its workers carry on.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from taskq import errors
from taskq.cli import command, output, values
from taskq.dev import local_cluster, membership
from taskq.dev.cluster import RqliteCluster, RqliteNode
from taskq.dev.local_cluster import LocalCluster


def add_commands(commands: command.Commands) -> None:
    """Register ``taskq dev``."""
    dev = commands.add_parser(
        "dev",
        help="developer tools: a local rqlite cluster with workers",
        description="Developer tools.",
    )
    tools: command.Commands = dev.add_subparsers(dest="tool", required=True, metavar="TOOL")
    cluster = tools.add_parser(
        "cluster",
        help="a local rqlite cluster on loopback: start, status, stop, add, remove, replace",
        description="A local rqlite cluster on 127.0.0.1, its nodes (and workers) stopped by\n"
        "pid. Its data, logs, pids and store URL live in --dir (default TASKQ_CLUSTER_DIR,\n"
        "else taskq-cluster in XDG_RUNTIME_DIR or /tmp). rqlited comes from TASKQ_RQLITED,\n"
        "PATH, or the cache that scripts/install_rqlite.sh builds into.\n\n"
        "  taskq dev cluster start --nodes 3 --workers 2   # prints the store URL last\n"
        "  taskq dev cluster start --workers 2 --modules mypkg.tasks --queues default,texts\n"
        "  taskq dev cluster status\n"
        "  taskq dev cluster add                # a 4th node joins (node4)\n"
        "  taskq dev cluster remove node1       # out of the cluster, then stopped\n"
        "  taskq dev cluster replace node2      # stopped, removed, a fresh node in its place\n"
        "  taskq dev cluster stop",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions: command.Commands = cluster.add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    start = _action(actions, "start", cmd_start, "start a fresh cluster (wiping the last one)")
    start.add_argument("--nodes", type=values.count, default=3, help="nodes (default 3)")
    start.add_argument(
        "--workers",
        type=_worker_count,
        default=0,
        help="taskq-worker processes to start on it (default 0)",
    )
    start.add_argument(
        "--http-base",
        type=_port,
        default=None,
        help="HTTP port of node 1; node i uses base+2(i-1) (default TASKQ_CLUSTER_HTTP_BASE "
        "or 4001)",
    )
    start.add_argument(
        "--raft-base",
        type=_port,
        default=None,
        help="Raft port of node 1, same stride (default TASKQ_CLUSTER_RAFT_BASE or HTTP base+1)",
    )
    start.add_argument(
        "--modules",
        default=None,
        help="modules the workers run jobs from (default TASKQ_WORKER_MODULES or taskq.demo_jobs)",
    )
    start.add_argument(
        "--queues",
        default=None,
        help="comma-separated queues the workers take jobs from (default: taskq-worker's own, "
        "the queue default)",
    )
    start.add_argument(
        "--rqlited-args",
        default=None,
        help="extra rqlited flags for every node, split like a shell would "
        "(default TASKQ_CLUSTER_RQLITED_ARGS)",
    )
    _action(actions, "status", cmd_status, "each node's pid, address, raft state and leader")
    _action(actions, "stop", cmd_stop, "stop the recorded workers and nodes (idempotent)")
    _action(actions, "add", cmd_add, "start a new node that joins the running cluster")
    remove = _action(actions, "remove", cmd_remove, "take a node out of the cluster, then stop it")
    remove.add_argument("node", metavar="NODE", help="the node's id, e.g. node1")
    replace = _action(
        actions,
        "replace",
        cmd_replace,
        "stop a node if it runs, remove it, and add a fresh node (a new id) in its place",
    )
    replace.add_argument("node", metavar="NODE", help="the node's id, e.g. node2")


def _worker_count(text: str) -> int:
    """A count that may be 0: a cluster without workers."""
    return 0 if text.strip() == "0" else values.count(text)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is from 1 to 65535, got {port}")
    return port


def _action(
    actions: command.Commands, name: str, handler: command.Handler, help: str
) -> command.Parser:
    parser = actions.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".")
    parser.add_argument("--dir", type=Path, default=None, help="the cluster's directory")
    parser.set_defaults(handler=handler)
    return parser


def _cluster(args: argparse.Namespace) -> LocalCluster:
    chosen = {"directory": args.dir}
    if args.action == "start":
        chosen |= {
            "nodes": args.nodes,
            "workers": args.workers,
            "http_base": args.http_base,
            "raft_base": args.raft_base,
            "modules": args.modules,
            "queues": args.queues,
            "rqlited_args": None if args.rqlited_args is None else shlex.split(args.rqlited_args),
        }
    return LocalCluster(**{name: value for name, value in chosen.items() if value is not None})


def _say(message: str) -> None:
    output.warn(f"taskq dev cluster: {message}")


def cmd_start(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    url = cluster.start(_say)
    _say(f"running; stop it with: {cluster.command('stop')}")
    print(url)
    return command.EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    outcome = _cluster(args).stop(_say)
    _say(f"stopped {outcome.stopped} node(s)")
    if outcome.left:
        raise errors.TaskqError(f"not stopped, still running: {', '.join(outcome.left)}")
    return command.EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    local = _cluster(args)
    cluster = local.recorded()
    if cluster is None:
        raise errors.TaskqError(f"no cluster in {local.directory}")
    rows = [local_cluster.node_line(cluster, node) for node in cluster.nodes]
    output.print_table(("NODE", "PID", "HTTP", "STATE", "LEADER"), rows)
    answering = [
        node
        for node, row in zip(cluster.nodes, rows, strict=True)
        if row[3] not in ("down", "no-answer")
    ]
    if answering:
        _print_membership(cluster, answering[0])
    for name, pid in local.worker_pids().items():
        log = local.directory / name / "worker.log"
        print(f"{name}: running, pid {pid}, log {log}" if pid else f"{name}: not running")
    url = local.url()
    if url:
        print(f"\nstore URL: {url}")
    return command.EXIT_OK if answering else command.EXIT_ERROR


def _running(args: argparse.Namespace) -> tuple[LocalCluster, RqliteCluster]:
    local = _cluster(args)
    cluster = local.recorded()
    if cluster is None or not any(node.alive for node in cluster.nodes):
        raise errors.TaskqError(
            f"no cluster runs in {local.directory} (start one: {local.command('start')})"
        )
    return local, cluster


def cmd_add(args: argparse.Namespace) -> int:
    local, cluster = _running(args)
    node = membership.add_node(cluster, _say)
    _say(f"{node.node_id} joined; the store URL is now {local.url()}")
    return command.EXIT_OK


def cmd_remove(args: argparse.Namespace) -> int:
    local, cluster = _running(args)
    membership.remove_node(cluster, args.node, _say)
    _say(f"{args.node} removed and stopped; the store URL is now {local.url()}")
    return command.EXIT_OK


def cmd_replace(args: argparse.Namespace) -> int:
    local, cluster = _running(args)
    node = membership.replace_node(cluster, args.node, _say)
    _say(f"{args.node} replaced by {node.node_id}; the store URL is now {local.url()}")
    return command.EXIT_OK


def _print_membership(cluster: RqliteCluster, node: RqliteNode) -> None:
    print(f"\ncluster membership as seen by {node.http_addr} (/nodes?ver=2):")
    listed = cluster.get_json(node, "/nodes?ver=2")
    members = listed.get("nodes") if listed else None
    if not isinstance(members, list):
        print("  (no answer)")
        return
    for member in sorted(members, key=lambda member: str(member.get("id", ""))):
        print(
            f"  {member.get('id')!s:<7} api={member.get('api_addr')!s:<22} "
            f"raft={member.get('addr')!s:<16} voter={member.get('voter')!s:<5} "
            f"reachable={member.get('reachable')!s:<5} leader={member.get('leader')}"
        )
