"""Commands about the store and the fleet: cluster, workers, stats."""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Sequence

from taskq import errors, humanize
from taskq.broker import worker_policy
from taskq.broker.client import members
from taskq.broker.client.client import Client, ThroughputBucket
from taskq.broker.records import LIVE_SECONDS, JobState, WorkerInfo
from taskq.broker.stores.store import NodeInfo
from taskq.broker.stores.store_url import SqliteTarget, is_http_url, mask_password, parse_store_url
from taskq.cli import command, connection, output, values


def add_commands(commands: command.Commands) -> None:
    """Register the store and fleet commands."""
    cluster = command.add(
        commands,
        "cluster",
        cmd_cluster,
        help="the store's nodes, leader, reachability and raft state; remove a node",
        description="The store's nodes, leader, reachability and raft state.\n\n"
        "  taskq cluster                  # describe the store\n"
        "  taskq cluster remove node2     # take node2 out of the rqlite cluster\n\n"
        "A node joins with rqlited's own flags (-node-id NEW -join RAFT_ADDRS): see\n"
        "docs/stores.md, 'Changing the cluster'.",
        json=True,
    )
    actions: command.Commands = cluster.add_subparsers(
        dest="cluster_action", required=False, metavar="ACTION"
    )
    remove = command.add(
        actions,
        "remove",
        cmd_cluster_remove,
        help="take a node out of the rqlite cluster by its id (rqlite's DELETE /remove); "
        "stop the node afterwards",
        json=True,
    )
    remove.add_argument("node", metavar="NODE", help="the node's id, as 'taskq cluster' shows it")
    workers = command.add(
        commands,
        "workers",
        cmd_workers,
        help="registered workers: host, running jobs, slots (now/most when autoscaled), "
        "what each runs (its modules, +python_exec, +shell; - when unknown), last heartbeat",
        json=True,
    )
    workers.add_argument("--all", action="store_true", help="include stopped workers")
    stats = command.add(
        commands,
        "stats",
        cmd_stats,
        help="jobs per state, and finished attempts per minute lately",
        json=True,
    )
    stats.add_argument(
        "--minutes", type=values.count, default=15, help="how many minutes back (default 15)"
    )


def cmd_cluster(args: argparse.Namespace) -> int:
    named = connection.named_url(args)
    url = mask_password(named)
    served = is_http_url(named)
    embedded = not served and isinstance(parse_store_url(named), SqliteTarget)
    schema_version: int | None = None
    with connection.client(args, migrate=False, read_only=True) as client:
        nodes = client.nodes()
        if any(node.reachable for node in nodes):
            # The node may have gone meanwhile, or nothing was ever written to the store.
            with contextlib.suppress(errors.StoreUnavailable, errors.StatementError):
                schema_version = client.schema_version()
    healthy = any(node.leader for node in nodes)
    if args.json:
        output.print_json(
            {
                "store": url,
                "kind": "served" if served else "embedded" if embedded else "rqlite",
                "schema_version": schema_version,
                "nodes": nodes,
            }
        )
        return command.EXIT_OK if healthy else command.EXIT_ERROR
    print(f"store   {url}")
    if embedded:
        print("kind    embedded SQLite file on this machine: no cluster, no replication")
    else:
        leaders = [node.id for node in nodes if node.leader]
        reachable = sum(node.reachable for node in nodes)
        # A taskq serve's store is known by the nodes it reports: one, "embedded", or a cluster.
        kind = "taskq serve, its store's nodes as it sees them" if served else "rqlite cluster"
        print(
            f"kind    {kind}: {len(nodes)} node(s), {reachable} reachable, "
            f"leader {leaders[0] if leaders else 'none'}"
        )
    print(f"schema  version {'unknown' if schema_version is None else schema_version}")
    # With no node answering, each one's own error is all there is to go on: shown whole.
    _print_nodes(nodes, whole_errors=not any(node.reachable for node in nodes))
    if not healthy:
        output.warn(f"taskq: error: {_why_no_leader(url, nodes, served=served)}")
    return command.EXIT_OK if healthy else command.EXIT_ERROR


def _why_no_leader(url: str, nodes: Sequence[NodeInfo], *, served: bool) -> str:
    """Why the store at ``url`` has no leader: no node answers (each one's error is in the
    table), or the nodes that answer have none among them."""
    if any(node.reachable for node in nodes):
        return f"{url} has no leader: the cluster cannot accept writes"
    # Not "no leader": with no node reached, nothing says whether one leads.
    reached = f"{url} reaches no node of its store" if served else f"no node of {url} answers"
    return f"{reached} (see REACHABLE): nothing can be read or written"


def cmd_cluster_remove(args: argparse.Namespace) -> int:
    url = connection.store_url(args)
    left = members.remove_node(url, args.node)
    if args.json:
        output.print_json({"removed": args.node, "nodes": left})
        return command.EXIT_OK
    # The node may be dead already (the usual case: replacing a lost node), and Raft
    # counts on a member remembering its votes: the way back is a fresh node, never
    # the old id on an empty directory (docs/stores.md, 'Replacing a dead node').
    print(
        f"removed {args.node} from {mask_password(url)}; stop its rqlited if it still runs "
        "and delete its data directory: it may join again only under a new node id"
    )
    _print_nodes(left)
    voters = sum(node.voter for node in left)
    if voters % 2 == 0:
        # An even count tolerates no more failures than one fewer voter would.
        print(
            f"{voters} voters left: add a node with a new id (rqlited -node-id NEW -join ...) "
            "to keep their number odd; see docs/stores.md, 'Changing the cluster'"
        )
    return command.EXIT_OK


def _print_nodes(nodes: Sequence[NodeInfo], *, whole_errors: bool = False) -> None:
    output.print_table(
        ("ID", "ADDRESS", "ROLE", "REACHABLE", "RAFT STATE", "VERSION"),
        [
            (
                node.id,
                node.address or "-",
                "leader" if node.leader else ("voter" if node.voter else "non-voter"),
                "yes" if node.reachable else _unreachable(node.error, whole=whole_errors),
                node.raft_state,
                node.version,
            )
            for node in nodes
        ],
    )


# Why a node is not reached, in a few words, by what its error says (Python's or rqlite's).
_REASONS = (
    ("connection refused", "connection refused"),
    ("timed out", "timed out"),
    ("i/o timeout", "timed out"),
    ("connection reset", "connection reset"),
    ("no route to host", "no route to host"),
    ("name or service not known", "unknown host"),
    ("name resolution", "unknown host"),
    ("certificate", "certificate refused"),
)


def _unreachable(error: str, *, whole: bool) -> str:
    """The REACHABLE cell of a node not reached: ``no (connection refused)``, or the whole
    error when ``whole``; ``--json`` always has the whole error."""
    if whole or not error:
        return f"no {error}".strip()
    lowered = error.lower()
    reason = next((short for phrase, short in _REASONS if phrase in lowered), None)
    return f"no ({reason or output.one_line(error, 40)})"


def cmd_workers(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        workers = client.workers()
    if not args.all:
        workers = [worker for worker in workers if worker.state != "stopped"]
    if args.json:
        output.print_json(workers)
        return command.EXIT_OK
    if not workers:
        print("no workers" + ("" if args.all else " (--all shows stopped ones)"))
        return command.EXIT_OK
    now = time.time()
    output.print_table(
        (
            "NAME",
            "ID",
            "STATE",
            "HOST",
            "PID",
            "RUNNING",
            "SLOTS",
            "QUEUES",
            "LABELS",
            "RUNS",
            "HEARTBEAT",
            "UP",
        ),
        [
            (
                worker.name,
                worker.id,
                _state_as_seen(worker, now),
                worker.host,
                worker.pid,
                f"{worker.running}/{worker.slots}",
                humanize.slots(worker.slots, worker.max_slots),
                ",".join(worker.queues),
                ",".join(worker.labels) or "-",
                worker_policy.summary(worker.policy),
                output.relative(worker.heartbeat_at, now=now),
                output.duration(max(_up_until(worker, now) - worker.started_at, 0.0)),
            )
            for worker in workers
        ],
    )
    if any(_silent(worker, now) for worker in workers):
        print(
            f"silent: no heartbeat for over {LIVE_SECONDS:g} s, and not yet marked lost: the "
            "workers' maintenance marks it, so a store no live worker serves keeps it so"
        )
    return command.EXIT_OK


def _silent(worker: WorkerInfo, now: float) -> bool:
    """Whether ``worker`` says it runs (active, draining) but has not been heard for too long:
    killed, frozen or cut off, where no live worker's maintenance has marked it lost yet."""
    return worker.state in ("active", "draining") and now - worker.heartbeat_at > LIVE_SECONDS


def _state_as_seen(worker: WorkerInfo, now: float) -> str:
    return f"{worker.state} (silent)" if _silent(worker, now) else worker.state


def _up_until(worker: WorkerInfo, now: float) -> float:
    """When ``worker`` was last up: now while it runs; a stopped, lost or silent one, at its
    last heartbeat (its UP is how long it ran, not how long ago it started)."""
    gone = worker.state in ("stopped", "lost") or _silent(worker, now)
    return worker.heartbeat_at if gone else now


def cmd_stats(args: argparse.Namespace) -> int:
    with connection.client(args, read_only=True) as client:
        queues = client.stats()
        minutes = finished_per_minute(client, args.minutes, time.time())
    buckets = [bucket for _, bucket in minutes]
    totals = {state.value: sum(q.counts.get(state, 0) for q in queues) for state in JobState}
    if args.json:
        output.print_json({"queues": len(queues), "totals": totals, "throughput": buckets})
        return command.EXIT_OK
    print(f"jobs in {len(queues)} queue(s): {sum(totals.values())}")
    output.print_table(tuple(totals), [tuple(totals.values())])
    print()
    active = [(start, bucket) for start, bucket in minutes if bucket.outcomes]
    if not active:
        print(f"no attempts finished in the last {args.minutes} minutes")
        return command.EXIT_OK
    print(f"finished attempts per minute, last {args.minutes} minutes (local time):")
    rows = []
    for start, bucket in active:
        minute = time.strftime("%H:%M", time.localtime(start))
        detail = ", ".join(f"{name} {n}" for name, n in sorted(bucket.outcomes.items()))
        rows.append((minute, sum(bucket.outcomes.values()), detail))
    output.print_table(("MINUTE", "ATTEMPTS", "OUTCOMES"), rows)
    return command.EXIT_OK


def finished_per_minute(
    client: Client, minutes: int, now: float
) -> list[tuple[float, ThroughputBucket]]:
    """The attempts finished in each of the last ``minutes`` minutes of the clock, ``now``'s
    the last, oldest first, each with the time its minute starts.

    The store counts back from the time it is given, 60 s at a time: counted
    back from the end of ``now``'s minute, each count is one minute of the
    clock, and an attempt that ended at 04:19:08 is counted under 04:19
    (counted back from ``now`` itself, say 04:20:10, it fell in the 60 s
    ending 04:19:10).
    """
    end = (math.floor(now / 60) + 1) * 60
    # Just short of the end: an attempt that ended on a minute's first instant is that minute's.
    buckets = client.throughput(minutes=minutes, now=end - _JUST_SHORT)
    return [(end - 60 * (bucket.minutes_ago + 1), bucket) for bucket in buckets]


# A microsecond: more than a float of today's unix time rounds away (2.4e-7 s).
_JUST_SHORT = 1e-6
