"""Who belongs to an rqlite cluster and who leads: asked, described, and one member removed.

Plans of HTTP calls over a store's :class:`ClusterView` (run by
:mod:`taskq.broker.stores.rqlite_store`): :func:`discover_leader` asks the
nodes, leader first, who belongs and who leads (``/nodes?ver=2``), which is
also how a client learns of nodes added or removed since its URL was
written; :func:`look_for_leader` asks the healthy ones in turns while no
leader is known; :func:`raft_states` asks the nodes that answer without a
leader what they are doing; :func:`describe` adds each member's own ``/status``;
:func:`remove` takes a member out of the cluster through the leader's
``DELETE /remove``, as rqlite documents for a node that is gone for good or
is being retired; :func:`refusal` tells a missing permission from a wrong
password.
"""

from __future__ import annotations

from dataclasses import replace

from taskq import errors
from taskq.broker.stores import rqlite_protocol as protocol
from taskq.broker.stores.http_plan import HttpCall, HttpPlan, HttpReply
from taskq.broker.stores.rqlite_cluster import ClusterView, by_port_layout, with_known_addresses
from taskq.broker.stores.rqlite_failover import Quorum, Refusals
from taskq.broker.stores.rqlite_protocol import AnswerKind
from taskq.broker.stores.store import NodeInfo

DISCOVERY_TIMEOUT = 2.0
# rqlite's /nodes asks every member for its API address and waits for each
# up to its ``timeout`` (30 s unless told): a member that does not answer is
# reported unreachable well within the client's own wait for the answer.
_NODES_PARAMS = {"ver": "2", "timeout": "1s"}
# A removal is one Raft configuration change; the leader answers once it is committed.
_REMOVE_TIMEOUT = 10.0
# A removal whose leader moved or was lost on the way is tried again this many times.
_REMOVE_TRIES = 3


def _ask_nodes(node: str) -> HttpCall:
    return HttpCall("GET", node, "/nodes", _NODES_PARAMS, timeout=DISCOVERY_TIMEOUT)


def discover_leader(
    cluster: ClusterView,
    *,
    tls: bool,
    now: float,
    refusals: Refusals | None = None,
    quorum: Quorum | None = None,
) -> HttpPlan[list[NodeInfo]]:
    """Ask the nodes, leader first, who belongs and who leads; the first answer naming a leader.

    What they say is learned (:meth:`ClusterView.learn`), and noted in
    ``refusals`` and ``quorum``; ``now`` (the store's clock) marks the
    membership as fresh. Without a leader, every node is asked once.
    """
    cluster.refreshed_at = now
    for node in cluster.candidates():
        nodes = yield from _ask_who_leads(cluster, node, tls=tls, refusals=refusals, quorum=quorum)
        if any(info.leader for info in nodes):
            return nodes
    return []


def look_for_leader(
    cluster: ClusterView, *, tls: bool, refusals: Refusals, quorum: Quorum | None = None
) -> HttpPlan[None]:
    """Ask the nodes who leads, one at a time, until one answers; remember what it says."""
    for node in cluster.lookout():
        if (yield from _ask_who_leads(cluster, node, tls=tls, refusals=refusals, quorum=quorum)):
            return


def _ask_who_leads(
    cluster: ClusterView,
    node: str,
    *,
    tls: bool,
    refusals: Refusals | None,
    quorum: Quorum | None,
) -> HttpPlan[list[NodeInfo]]:
    """``node``'s answer to ``/nodes``, learned and noted; [] (the node failed) if none."""
    feedback = yield _ask_nodes(node)
    assert feedback is not None
    answer = protocol.read_answer(feedback)
    for noted in (refusals, quorum):
        if noted is not None:
            noted.note(node, answer)
    if not isinstance(feedback, HttpReply) or feedback.status != 200:
        cluster.node_failed(node)
        return []
    nodes = protocol.parse_nodes(feedback.data, tls=tls)
    cluster.learn(nodes)
    if quorum is not None:
        quorum.heard(node, with_known_addresses(nodes, cluster.nodes))
    return nodes


def raft_states(quorum: Quorum) -> HttpPlan[None]:
    """Ask each node that answered without a leader for its raft state (``/status``)."""
    for node in list(quorum.said):
        feedback = yield HttpCall("GET", node, "/status", timeout=DISCOVERY_TIMEOUT)
        if isinstance(feedback, HttpReply) and feedback.status == 200:
            quorum.states[node] = protocol.parse_status(feedback.data).raft_state


def refusal(
    node: str, outcome: protocol.RqliteAnswer, *, username: str | None, permission: str
) -> HttpPlan[errors.StoreError]:
    """The error for a refusal: bad credentials, or good ones short of ``permission``.

    rqlite answers 401 to both, so the node is asked for things that need
    other permissions: one it grants means the credentials are good.
    """
    accepted = False
    if outcome.status == 401 and username is not None:
        for needs, probe in _PROBES:
            if needs == permission:
                continue
            feedback = yield replace(probe, base_url=node)
            if isinstance(feedback, HttpReply) and feedback.status not in (401, 403):
                accepted = True
                break
    return protocol.refusal_error(
        node, outcome, username=username, permission=permission, accepted=accepted
    )


def describe(
    cluster: ClusterView, *, tls: bool, username: str | None, now: float
) -> HttpPlan[list[NodeInfo]]:
    """Every member, each with what its own ``/status`` says (or why it said nothing).

    Without a leader, the members are those a node that answers lists; a
    member whose API address is not known is listed by the address the
    client knows it by when that is plain, else by its id when no address
    the client knows is left that could be its, else the addresses are
    listed (as they are when no node answers at all).
    """
    quorum = Quorum()
    members = yield from discover_leader(cluster, tls=tls, now=now, quorum=quorum)
    if not members:
        members = _without_leader(quorum.members(), cluster.nodes)
    described: list[NodeInfo] = []
    for info in with_known_addresses(members, cluster.nodes):
        if not info.address:
            described.append(info)
            continue
        feedback = yield HttpCall("GET", info.address, "/status", timeout=DISCOVERY_TIMEOUT)
        assert feedback is not None
        if isinstance(feedback, HttpReply) and feedback.status == 200:
            status = protocol.parse_status(feedback.data)
            described.append(
                replace(
                    info,
                    id=info.id or status.node_id,
                    reachable=True,
                    raft_state=status.raft_state,
                    version=status.version,
                )
            )
            continue
        outcome = protocol.read_answer(feedback)
        if outcome.kind is AnswerKind.REFUSED:
            raise (
                yield from refusal(info.address, outcome, username=username, permission="status")
            )
        described.append(
            replace(
                info,
                id=info.id or "?",
                reachable=False,
                leader=False,
                error=outcome.message.strip()[:200],
            )
        )
    return described


def _without_leader(members: list[NodeInfo], known: list[str]) -> list[NodeInfo]:
    """The rows of a cluster without a leader: ``members`` (as a node that answers lists
    them) by their addresses, or each node the client knows of speaking for itself."""
    rows = by_port_layout(with_known_addresses(members, known), known)
    listed = {row.address for row in rows}
    unclaimed = [node for node in known if node not in listed]
    if any(not row.address for row in rows) and unclaimed:
        # Which address is whose is not known: the addresses, each speaking for itself.
        rows = [row for row in rows if row.address]
    return rows + [
        NodeInfo(id="", address=node, reachable=False, leader=False) for node in unclaimed
    ]


def remove(
    cluster: ClusterView, node_id: str, *, tls: bool, username: str | None, now: float
) -> HttpPlan[list[NodeInfo]]:
    """Take the member ``node_id`` out of the cluster; the members left.

    Refused, changing nothing, when no leader is known, when ``node_id`` is
    not a member (the error lists the members), or when it is the only one.
    A removal that meets a lost leader looks again and tries anew: removing
    is safe to repeat, and a member found gone already is done.
    """
    sent = False
    for _ in range(_REMOVE_TRIES):
        members = yield from discover_leader(cluster, tls=tls, now=now)
        if not members:
            raise errors.StoreUnavailable(
                f"no node of {', '.join(cluster.nodes)} names a leader: a member is removed "
                "through the leader, and the cluster needs a quorum to change"
            )
        ids = sorted(member.id for member in members)
        if node_id not in ids and sent:
            return members  # the last try went through after all
        if node_id not in ids:
            raise errors.NodeNotFound(
                f"the cluster has no node {node_id!r}; its nodes: {', '.join(ids)}"
            )
        if len(members) == 1:
            raise errors.MembershipRefused(
                f"{node_id!r} is the cluster's only node: a cluster cannot remove its last node"
            )
        leader = next(member.address for member in members if member.leader and member.address)
        sent = True
        feedback = yield HttpCall(
            "DELETE", leader, "/remove", {}, {"id": node_id}, timeout=_REMOVE_TIMEOUT
        )
        assert feedback is not None
        if isinstance(feedback, HttpReply) and feedback.status == 200:
            left = yield from discover_leader(cluster, tls=tls, now=now)
            # No leader named yet (the node removed led, and the others are electing
            # one): the members are those there were, less the one removed.
            return [member for member in (left or members) if member.id != node_id]
        outcome = protocol.read_answer(feedback)
        if outcome.kind is AnswerKind.REFUSED:
            raise (yield from refusal(leader, outcome, username=username, permission="remove"))
        if isinstance(feedback, HttpReply) and feedback.status not in (301, 302, 307, 308, 503):
            raise errors.StoreError(
                f"rqlite at {leader} did not remove {node_id!r}: HTTP {feedback.status}: "
                f"{feedback.text.strip()[:200]}"
            )
        cluster.node_failed(leader)  # leadership moved or was lost: look again
    raise errors.StoreUnavailable(
        f"rqlite cluster {', '.join(cluster.nodes)} did not remove {node_id!r}: its leader "
        f"changed or was lost {_REMOVE_TRIES} times on the way"
    )


_PROBES = (
    ("status", HttpCall("GET", "", "/status", timeout=DISCOVERY_TIMEOUT)),
    ("ready", HttpCall("GET", "", "/readyz", timeout=DISCOVERY_TIMEOUT)),
    (
        "query",
        HttpCall(
            "POST", "", "/db/query", {"level": "none"}, [["SELECT 1"]], timeout=DISCOVERY_TIMEOUT
        ),
    ),
)
