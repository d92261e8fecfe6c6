"""How one request to an rqlite cluster rides out a lost leader, and when it gives up.

A request that fails for want of a leader tries again, asking who leads every
:data:`LEADER_POLL_SECONDS`, for :func:`failover_budget` of the store URL's
``retries`` (:class:`Failover`). When every node it knows refuses the
connection, no node is electing, and it gives up after that one round
(:class:`Refusals`). When the nodes that answer know no leader and a majority
of the voters are out of their reach, no election can complete until nodes
come back (:class:`Quorum`): a read that may be stale is answered from a
survivor's copy at once, and other requests give up once every node has been
asked again, rather than wait out ``retries``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from taskq import errors
from taskq.broker.stores import rqlite_protocol as protocol
from taskq.broker.stores.store import NodeInfo

# How often a request without a leader asks who leads, and paces its tries:
# an election on a LAN takes about a second, so a new leader is seen within
# a tenth of one, at ten small reads a second per client.
LEADER_POLL_SECONDS = 0.1
# The pauses of the schedule that ``retries`` counted before: its first retry
# at once, then 0.5 s doubling up to 2 s. Their sum is the failover budget.
_FIRST_PAUSE_SECONDS = 0.5
_LONGEST_PAUSE_SECONDS = 2.0


class Refusals:
    """The nodes that refused a connection during one request, since any node last answered.

    Once every node the client knows is among them, nothing listens at any
    of their addresses (a cluster that is down, or a wrong URL): an election
    needs nodes that run, and they would answer or at least accept the
    connection, so the failover budget would only put off saying so. A node
    that answers anything, or times out, empties the set.
    """

    def __init__(self, failed: str) -> None:
        self.failed = failed  # what the request did not get, as "answered no read"
        self.nodes: set[str] = set()
        self.last = ""

    def note(self, node: str, answer: protocol.RqliteAnswer) -> None:
        if answer.refused:
            self.nodes.add(node)
            self.last = answer.message
        else:
            self.nodes.clear()

    def everywhere(self, known: Sequence[str]) -> bool:
        return bool(known) and self.nodes.issuperset(known)

    def error(self, cluster: str, known: Sequence[str]) -> errors.StoreUnreachable:
        return errors.StoreUnreachable(
            f"rqlite cluster {cluster} {self.failed}: every node refused the connection "
            f"({', '.join(known)}): {self.last}"
        )


class Quorum:
    """Whether the cluster can elect a leader, from what its nodes said during one request.

    Raft elects a leader only with the votes of a majority of the voters. A
    node that answers ``/nodes`` without naming a leader lists the voters and
    whether it reaches each of them now. When the voters that some answering
    node reaches are fewer than a majority, no election can complete until
    nodes come back, however long a request waits. A leader named by any
    answer makes all that moot and forgets it.
    """

    def __init__(self) -> None:
        # Each node that answered /nodes without naming a leader: the members it listed last.
        self.views: dict[str, list[NodeInfo]] = {}
        # Each node that answered without a leader, and its words ("" from /nodes).
        self.said: dict[str, str] = {}
        self.states: dict[str, str] = {}  # their raft state, once asked
        self.refused: set[str] = set()  # nodes whose host refused the client's connection

    def note(self, node: str, answer: protocol.RqliteAnswer) -> None:
        """Take in one answer of ``node`` to any request."""
        if answer.refused:
            self.refused.add(node)
        else:
            self.refused.discard(node)
        if answer.no_leader:
            self.said[node] = answer.message

    def heard(self, node: str, members: list[NodeInfo]) -> None:
        """Take in ``node``'s answer to ``/nodes``: who belongs, whom it reaches, who leads."""
        if any(member.leader for member in members):
            self.views.clear()
            self.said.clear()
            return
        self.views.pop(node, None)
        self.views[node] = members
        self.said.setdefault(node, "")

    def ask_again(self) -> None:
        """Forget who reaches whom, to hear it anew from every node."""
        self.views.clear()

    def voters(self) -> list[NodeInfo]:
        """The voters of the latest answer, each reachable if some answering node reaches it."""
        if not self.views:
            return []
        reached = {member.id for view in self.views.values() for member in view if member.reachable}
        return [
            replace(voter, reachable=voter.id in reached) for voter in self.members() if voter.voter
        ]

    def lost(self) -> bool:
        """Whether no election can complete: fewer than a majority of the voters are reached."""
        voters = self.voters()
        return bool(voters) and sum(voter.reachable for voter in voters) <= len(voters) // 2

    def without_leader(self, known: Sequence[str]) -> str:
        """Who answers and who does not, as ``1 of 3 nodes answers (...) and 2 refuse connections``.

        Counted over the voters when a node listed them, else over the
        ``known`` nodes by the client's own tries.
        """
        voters = self.voters()
        if voters:
            up = [voter.address or voter.id for voter in voters if voter.reachable]
            down = [voter for voter in voters if not voter.reachable]
            refusing = sum(
                1 for voter in down if voter.address in self.refused or _refuses(voter.error)
            )
            unreached = len(down) - refusing
            total = len(voters)
        else:
            up = [node for node in known if node in self.said] or list(self.said)
            refusing = sum(1 for node in known if node in self.refused and node not in up)
            unreached = len(known) - len(up) - refusing
            total = max(len(known), len(up))
        noun = "nodes" if all(member.voter for member in self.members()) else "voters"
        named = ", ".join(self._named(node) for node in up)
        parts = [f"{len(up)} of {total} {noun} {'answers' if len(up) == 1 else 'answer'} ({named})"]
        if refusing:
            parts.append(f"{refusing} {'refuses' if refusing == 1 else 'refuse'} connections")
        if unreached > 0:
            parts.append(f"{unreached} cannot be reached")
        return " and ".join(parts)

    def members(self) -> list[NodeInfo]:
        """Every member, as the node that answered last lists them; [] if none answered."""
        return list(self.views.values())[-1] if self.views else []

    def _named(self, node: str) -> str:
        """``node`` without its scheme, with its raft state and its words when known."""
        named = node.partition("://")[2] or node
        state = self.states.get(node, "")
        words = self.said.get(node, "")
        return named + (f", a {state.lower()}" if state else "") + (f": {words}" if words else "")


def _refuses(error: str) -> bool:
    """Whether a node's words about a member (``dial tcp …: connection refused``) say so."""
    return "connection refused" in error.lower()


class Failover:
    """One request's failed tries: whether to try again, and by when to give up.

    A request rides out a lost leader for :func:`failover_budget` of its
    ``retries`` seconds, counted from its first failed try, and makes at
    least ``retries + 1`` tries. Only after both does it give up, so a small
    ``retries`` still means that many quick tries.
    """

    def __init__(self, retries: int, clock: Callable[[], float]) -> None:
        self.retries = retries
        self.clock = clock
        self.tries = 0
        self.deadline = float("inf")

    def failed(self) -> None:
        if not self.tries:
            self.deadline = self.clock() + failover_budget(self.retries)
        self.tries += 1

    def spent(self) -> bool:
        return self.tries > self.retries and self.clock() >= self.deadline

    def pause(self) -> float:
        """The next wait for a leader: the poll interval, cut at the deadline."""
        return max(0.0, min(LEADER_POLL_SECONDS, self.deadline - self.clock()))


def failover_budget(retries: int) -> float:
    """Seconds a request rides out a lost leader, for the store URL's ``retries``.

    What ``retries`` tries paced as before waited in all: the first retry at
    once, then 0.5 s doubling up to 2 s between tries. The default 8 give
    11.5 s, longer than an election takes, so a leader's death is ridden
    through; 1 gives none (one quick retry), 0 none at all.
    """
    return sum(
        (
            min(_FIRST_PAUSE_SECONDS * 2.0 ** (retry - 2), _LONGEST_PAUSE_SECONDS)
            for retry in range(2, retries + 1)
        ),
        0.0,
    )
