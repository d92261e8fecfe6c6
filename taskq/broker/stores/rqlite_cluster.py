"""What an rqlite client knows of the cluster: its nodes, who leads, their API addresses.

:class:`ClusterView` is what one store believes (the nodes it was given and
those the cluster reported, the leader, the nodes that failed lately);
:func:`with_known_addresses` fills in the API address rqlite cannot give for
a member it cannot reach, and :func:`by_port_layout` the rest for a
description, where the reachable members' ports show how the nodes are laid out.

The cluster's membership may change while the client runs (nodes added,
removed, replaced): every answer that names a leader is taken as the
membership of now, so nodes added since the store URL was written are
learned, and nodes removed since are forgotten, but for the URL's own,
which stay last in line as a way back in. A store asks again at least every
:data:`MEMBERSHIP_REFRESH_SECONDS`, so a client that has not failed over
meanwhile still learns of a change before its URL's nodes are all gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Self

from taskq.broker.stores.http_wire import Endpoint
from taskq.broker.stores.store import NodeInfo

# How often a store asks the cluster who belongs, failover or not: one small
# read of the leader's, about as often as a worker's heartbeat or two.
MEMBERSHIP_REFRESH_SECONDS = 10.0


@dataclass
class ClusterView:
    """What this client believes about the cluster: its nodes and who leads."""

    nodes: list[str]
    leader: str | None = None
    recently_failed: set[str] = field(default_factory=set)
    # The nodes the store URL named: never forgotten, asked after the members.
    seeds: tuple[str, ...] = ()
    # When a store last asked the cluster who belongs (its clock).
    refreshed_at: float = float("-inf")
    # When a request last asked who leads (the store's clock), and how many
    # times: the requests of one store share the looks and take turns at nodes.
    looked_at: float = float("-inf")
    looks: int = 0

    @classmethod
    def of(cls, seeds: Sequence[str], now: float) -> Self:
        """What a store knows at ``now``, its start: the nodes its URL names.

        Its first request asks who leads and belongs, as it knows no leader;
        the next look is due :data:`MEMBERSHIP_REFRESH_SECONDS` after ``now``.
        """
        return cls(nodes=list(seeds), seeds=tuple(seeds), refreshed_at=now)

    def refresh_due(self, now: float) -> bool:
        """Whether it is time to ask the cluster who belongs again."""
        return now - self.refreshed_at >= MEMBERSHIP_REFRESH_SECONDS

    def write_target(self) -> str:
        if self.leader and self.leader not in self.recently_failed:
            return self.leader
        for node in self.nodes:
            if node not in self.recently_failed:
                return node
        # Everyone failed lately: start over rather than give up.
        self.recently_failed.clear()
        return self.leader or self.nodes[0]

    def node_failed(self, node: str) -> None:
        self.recently_failed.add(node)
        if self.leader == node:
            self.leader = None

    def learn(self, nodes: list[NodeInfo]) -> None:
        """Take in a node's answer to ``/nodes``: who belongs, and who leads.

        An answer that names a leader is the membership of now: its nodes
        replace those learned before, the URL's own kept after them. One
        without a leader (an election, or a node cut off) only adds nodes.
        """
        leaders = [node.address for node in nodes if node.leader and node.address]
        listed = [node.address for node in with_known_addresses(nodes, self.nodes)]
        if leaders:
            members = [address for address in listed if address]
            self.nodes = list(dict.fromkeys([*members, *self.seeds]))
            self.recently_failed &= set(self.nodes)
            self.leader = leaders[0]
            self.recently_failed.discard(leaders[0])
            return
        for address in listed:
            if address and address not in self.nodes:
                self.nodes.append(address)

    def candidates(self) -> list[str]:
        """Nodes in the order worth asking: the leader first, then the healthy ones."""
        ordered = [self.leader] if self.leader else []
        ordered += [node for node in self.nodes if node not in self.recently_failed]
        ordered += [node for node in self.nodes if node in self.recently_failed]
        return list(dict.fromkeys(node for node in ordered if node))

    def lookout(self) -> list[str]:
        """Nodes to ask who leads while no leader is known: the healthy ones first.

        Each look starts one healthy node further on, so that waiting
        requests spread their questions over the survivors.
        """
        healthy = [node for node in self.nodes if node not in self.recently_failed]
        turn = self.looks % len(healthy) if healthy else 0
        self.looks += 1
        return healthy[turn:] + healthy[:turn] + [n for n in self.nodes if n not in healthy]


def with_known_addresses(members: Sequence[NodeInfo], known: Sequence[str]) -> list[NodeInfo]:
    """``members``, each one rqlite listed without an API address given one we know.

    rqlite cannot tell the API address of a node it cannot reach. A known
    address (from the store URL, or learned) that no member claims is that
    node's when its host is the host of the node's raft address and no other
    spare address is on that host, or when it is the only address and the
    only node left over. Otherwise the address stays unknown ("").
    """
    claimed = {member.address for member in members}
    spare = [address for address in known if address not in claimed]
    missing = sum(1 for member in members if not member.address)
    found: list[NodeInfo] = []
    for member in members:
        if member.address:
            found.append(member)
            continue
        raft_host = member.raft_address.rpartition(":")[0]
        same_host = [address for address in spare if Endpoint.of(address).host == raft_host]
        if len(same_host) == 1:
            address = same_host[0]
        elif len(spare) == 1 and missing == 1:
            address = spare[0]
        else:
            address = ""
        if address:
            spare.remove(address)
        found.append(replace(member, address=address))
    return found


def by_port_layout(members: Sequence[NodeInfo], known: Sequence[str]) -> list[NodeInfo]:
    """``members``, those still without an API address given one by the ports' layout.

    Nodes that share a host need ports of their own, and are most often laid
    out alike (rqlite's own examples: HTTP 4001, Raft 4002; 4003, 4004; ...).
    When every member of a host whose API address is known has its Raft port
    the same distance from its HTTP port, a member of that host without an
    address gets the known address, claimed by no member, that lies that
    distance from its Raft port. Otherwise the address stays unknown. Only a
    description uses this: it reads the layout, rqlite does not say it.
    """
    claimed = {member.address for member in members}
    spare = {
        _host_port(Endpoint.of(address)): address for address in known if address not in claimed
    }
    distances: dict[str, set[int]] = {}
    for member in members:
        host, port = _raft_host_port(member)
        if member.address and Endpoint.of(member.address).host == host:
            distances.setdefault(host, set()).add(port - Endpoint.of(member.address).port)
    laid_out: list[NodeInfo] = []
    for member in members:
        host, port = _raft_host_port(member)
        apart = distances.get(host, set())
        address = spare.get((host, port - min(apart))) if len(apart) == 1 else None
        laid_out.append(
            replace(member, address=address) if address and not member.address else member
        )
    return laid_out


def _host_port(endpoint: Endpoint) -> tuple[str, int]:
    return endpoint.host, endpoint.port


def _raft_host_port(member: NodeInfo) -> tuple[str, int]:
    host, _, port = member.raft_address.rpartition(":")
    return host, int(port) if port.isdigit() else -1
