"""A running local cluster changed: a node added, a member removed, a dead node replaced.

What rqlite documents, done on loopback. A new node always takes a node id
never used in this cluster (``node<N>``, one past the highest so far) and
joins through the Raft addresses of the members (``-join``); it starts
empty, and the leader sends it the whole database. A node is removed through
the leader (``DELETE /remove``, by :meth:`RqliteStore.remove_node`), then
stopped, and its directory renamed ``removed-node<N>`` so that nothing
takes it for a member again. A replaced node is stopped if it still runs,
removed, and a fresh node added in its place: a node that lost its data
never comes back under its old id, which Raft's safety does not allow.

Each change rewrites the cluster's ``url`` file to name the members of
now; clients already running learn of the change from the cluster itself.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from taskq import errors
from taskq.broker.client import members
from taskq.dev.cluster import STOP_TIMEOUT_SECONDS, RqliteCluster, RqliteNode
from taskq.dev.processes import free_ports, port_is_free

JOIN_TIMEOUT_SECONDS = 60.0
REMOVED_PREFIX = "removed-"
# The flags of a node's command line that say who it is and how it first
# joined: a new node gets its own, and keeps every other flag of the template.
_IDENTITY_FLAGS = frozenset(
    {"-node-id", "-http-addr", "-raft-addr", "-bootstrap-expect", "-join", "-join-interval",
     "-join-attempts"}
)  # fmt: skip


def member(cluster: RqliteCluster, node_id: str) -> RqliteNode:
    """The recorded node ``node_id``; an error naming the nodes there are, if none."""
    for node in cluster.nodes:
        if node.node_id == node_id:
            return node
    names = ", ".join(node.node_id for node in cluster.nodes) or "none"
    raise errors.NodeNotFound(f"the cluster has no node {node_id!r}; its nodes: {names}")


def add_node(
    cluster: RqliteCluster,
    say: Callable[[str], None] = lambda _: None,
    *,
    timeout: float = JOIN_TIMEOUT_SECONDS,
) -> RqliteNode:
    """Start a fresh node that joins the cluster; it is returned once the leader lists it.

    Its flags are a member's, recorded when it started, with its own id,
    addresses and ``-join``. A node that does not join within ``timeout``
    is stopped and its directory removed, leaving the cluster as it was.
    """
    template = _template(cluster)
    leader = cluster.wait_for_leader(timeout)
    node = _new_node(cluster)
    joined = [other.raft_addr for other in cluster.nodes if other.alive]
    argv = _joining_argv(template, node, joined)
    node.tls = "-http-cert" in argv
    cluster.launch(node, argv)
    say(f"{node.node_id}: pid {node.pid}, http {node.http_addr}, joining through {leader.node_id}")
    cluster.nodes.append(node)
    deadline = time.monotonic() + timeout
    while not _listed(cluster, node):
        if time.monotonic() >= deadline or not node.alive:
            tail = cluster.log_tail(node)
            cluster.nodes.remove(node)
            cluster.kill_node(node, signal.SIGKILL)
            shutil.rmtree(node.directory, ignore_errors=True)
            raise errors.TaskqError(f"{node.node_id} did not join within {timeout:g} s:\n{tail}")
        time.sleep(0.1)
    _record_url(cluster)
    return node


def remove_node(
    cluster: RqliteCluster, node_id: str, say: Callable[[str], None] = lambda _: None
) -> None:
    """Take ``node_id`` out of the cluster through its leader, then stop it and retire it.

    Refused, changing nothing, for a node that is not recorded here or not a
    member, or when the cluster has no leader.
    """
    node = member(cluster, node_id)
    left = members.remove_node(_members_url(cluster, without=node), node_id)
    say(f"{node_id}: removed; members now {', '.join(sorted(m.id for m in left)) or '?'}")
    _retire(cluster, node)


def replace_node(
    cluster: RqliteCluster, node_id: str, say: Callable[[str], None] = lambda _: None
) -> RqliteNode:
    """Stop ``node_id`` if it still runs, remove it, and add a fresh node in its place."""
    node = member(cluster, node_id)
    _template(cluster)  # checked before anything changes
    if node.alive:
        cluster.kill_node(node, signal.SIGTERM, STOP_TIMEOUT_SECONDS)
        say(f"{node_id}: stopped")
        # It may have led: the others elect a leader first, which removes it.
        cluster.wait_for_leader(JOIN_TIMEOUT_SECONDS)
    remove_node(cluster, node_id, say)
    return add_node(cluster, say)


def _retire(cluster: RqliteCluster, node: RqliteNode) -> None:
    cluster.kill_node(node, signal.SIGTERM, STOP_TIMEOUT_SECONDS)
    cluster.nodes.remove(node)
    (node.directory / "pid").unlink(missing_ok=True)
    retired = node.directory.with_name(REMOVED_PREFIX + node.directory.name)
    shutil.rmtree(retired, ignore_errors=True)
    node.directory.rename(retired)
    _record_url(cluster)


def _listed(cluster: RqliteCluster, node: RqliteNode) -> bool:
    """Whether the leader lists ``node`` as a reachable member."""
    leader = cluster.leader()
    listed = cluster.get_json(leader, "/nodes?ver=2") if leader is not None else None
    members = listed.get("nodes") if listed else None
    if not isinstance(members, list):
        return False
    found = [m for m in members if isinstance(m, dict) and m.get("id") == node.node_id]
    return bool(found and found[0].get("reachable"))


def _template(cluster: RqliteCluster) -> list[str]:
    """A member's recorded command line, the model of a new node's."""
    for node in cluster.nodes:
        try:
            argv = (node.directory / "cmdline").read_text().splitlines()
        except OSError:
            continue
        if argv:
            return argv
    raise errors.TaskqError(f"no node of the cluster in {cluster.root} recorded its command line")


def _joining_argv(template: list[str], node: RqliteNode, join: list[str]) -> list[str]:
    binary, *flags = template[:-1]  # the data directory comes last
    kept: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag in _IDENTITY_FLAGS:
            skip = True
        else:
            kept.append(flag)
    return [
        binary,
        *("-node-id", node.node_id),
        *("-http-addr", node.http_addr),
        *("-raft-addr", node.raft_addr),
        *("-join", ",".join(join), "-join-interval", "250ms", "-join-attempts", "120"),
        *kept,
        str(node.data_dir),
    ]


def _new_node(cluster: RqliteCluster) -> RqliteNode:
    """The next node: a never used id, ports on the cluster's stride if it has one, else free."""
    used = [_number(path.name) for path in cluster.root.glob("*node*")]
    number = max([0, *used, *(_number(node.node_id) for node in cluster.nodes)]) + 1
    # The ports of node i are base + 2(i-1) in a cluster started on a base (taskq dev cluster).
    bases = {
        (node.http_port - stride, node.raft_port - stride)
        for node, stride in ((n, (_number(n.node_id) - 1) * 2) for n in cluster.nodes)
    }
    if len(bases) == 1:
        http_base, raft_base = bases.pop()
        ports = [http_base + 2 * (number - 1), raft_base + 2 * (number - 1)]
        for port in ports:
            if not port_is_free(port):
                raise errors.TaskqError(f"port {port} on loopback, for node{number}, is in use")
    else:
        ports = free_ports(2)
    node_id = f"node{number}"
    return RqliteNode(node_id, ports[0], ports[1], cluster.root / node_id)


def _number(name: str) -> int:
    digits = name.removeprefix(REMOVED_PREFIX).removeprefix("node")
    return int(digits) if digits.isdigit() else 0


def _members_url(cluster: RqliteCluster, *, without: RqliteNode) -> str:
    """A store URL naming the live nodes but ``without`` (its own answer would be no leader's)."""
    nodes = [node for node in cluster.nodes if node is not without and node.alive] or [without]
    scheme = "rqlites" if any(node.tls for node in nodes) else "rqlite"
    credentials = ":".join(cluster.credentials) + "@" if cluster.credentials else ""
    options = f"?ca_file={cluster.tls.ca}" if cluster.tls is not None else ""
    return f"{scheme}://{credentials}{','.join(node.http_addr for node in nodes)}{options}"


def _record_url(cluster: RqliteCluster) -> None:
    path: Path = cluster.root / "url"
    if path.exists():
        path.write_text(f"{cluster.url}\n")
