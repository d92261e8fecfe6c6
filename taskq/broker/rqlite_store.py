"""The replicated store: plans of HTTP calls to an rqlite cluster.

It knows every node it was given (and every node the cluster reports), sends
writes straight to the leader, and when a node dies or leadership moves it
finds the new leader and tries again, a bounded number of times. A write whose
outcome is unknown is resent only when the caller said it is idempotent;
otherwise :class:`taskq.errors.OutcomeUnknown` tells the caller to check.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from taskq import errors
from taskq.broker import rqlite_protocol as protocol
from taskq.broker.http_plan import (
    HttpCall,
    HttpReply,
    Pause,
    Plan,
    Transport,
    run_plan,
    run_plan_async,
)
from taskq.broker.http_transport import HttpTransport, TransportOptions
from taskq.broker.rqlite_protocol import Verdict
from taskq.broker.store import Consistency, NodeInfo, Row, Statement, StatementResult
from taskq.broker.store_url import RqliteTarget, mask_password

_DISCOVERY_TIMEOUT = 2.0
_CHANGE_POLL_SECONDS = 0.02


@dataclass
class ClusterView:
    """What this client believes about the cluster: its nodes and who leads."""

    nodes: list[str]
    leader: str | None = None
    recently_failed: set[str] = field(default_factory=set)

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
        for node in nodes:
            if node.address and node.address not in self.nodes:
                self.nodes.append(node.address)
        leaders = [node.address for node in nodes if node.leader and node.address]
        if leaders:
            self.leader = leaders[0]
            self.recently_failed.discard(leaders[0])

    def candidates(self) -> list[str]:
        """Nodes in the order worth asking: the leader first, then the healthy ones."""
        ordered = [self.leader] if self.leader else []
        ordered += [node for node in self.nodes if node not in self.recently_failed]
        ordered += [node for node in self.nodes if node in self.recently_failed]
        return list(dict.fromkeys(node for node in ordered if node))


class RqliteStore:
    """A :class:`taskq.broker.store.Store` over an rqlite cluster."""

    def __init__(
        self,
        target: RqliteTarget,
        *,
        display_url: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        if target.tls and target.ca_file is not None and not os.path.isfile(target.ca_file):
            raise errors.ConfigError(
                f"rqlite store: ca_file {target.ca_file!r} is not a file (the CA to trust for TLS)"
            )
        self.target = target
        # Tests hand in a scripted transport to play the cluster's part.
        self._transport = transport or HttpTransport(
            TransportOptions(
                timeout=target.timeout,
                connect_timeout=min(target.timeout, 2.0),
                username=target.username,
                password=target.password,
                ca_file=target.ca_file,
                insecure=target.insecure,
            )
        )
        self._display_url = mask_password(display_url or ",".join(target.base_urls()))
        self.cluster = ClusterView(nodes=list(target.base_urls()))

    @property
    def url(self) -> str:
        return self._display_url

    # -- the Store interface: each entry point runs the same plan

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return run_plan(self._execute_plan(statements, idempotent), self._transport)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return await run_plan_async(self._execute_plan(statements, idempotent), self._transport)

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return run_plan(self._query_plan(statement, consistency), self._transport)

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return await run_plan_async(self._query_plan(statement, consistency), self._transport)

    def nodes(self) -> list[NodeInfo]:
        return run_plan(self._nodes_plan(), self._transport)

    async def nodes_async(self) -> list[NodeInfo]:
        return await run_plan_async(self._nodes_plan(), self._transport)

    async def wait_for_change(self, timeout: float) -> None:
        # rqlite pushes nothing to clients: wait a short poll interval and let
        # the caller's cheap read (at consistency none) decide.
        await anyio.sleep(min(timeout, _CHANGE_POLL_SECONDS))

    def close(self) -> None:
        self._transport.close()

    async def aclose(self) -> None:
        await self._transport.aclose()

    # -- plans

    def _request_params(self) -> dict[str, str]:
        return {"associative": "", "timeout": f"{self.target.timeout:g}s"}

    def _execute_plan(
        self, statements: Sequence[Statement], idempotent: bool
    ) -> Plan[list[StatementResult]]:
        body = protocol.statements_body(statements)
        sql = [statement.sql for statement in statements]
        params = {**self._request_params(), "transaction": ""}
        last = ""
        if self.cluster.leader is None:
            yield from self._discover_leader()
        for attempt in range(self.target.retries + 1):
            node = self.cluster.write_target()
            # /db/execute, not /db/request: in rqlite 10.2 a transactional
            # /db/request that meets a statement which fails to prepare (a
            # syntax error, an unknown column) commits the other statements;
            # /db/execute rolls the whole batch back on any error.
            feedback = yield HttpCall("POST", node, "/db/execute", params, body)
            assert feedback is not None
            outcome = protocol.classify(feedback, sql=sql)
            if outcome.verdict is Verdict.OK:
                assert outcome.results is not None
                return outcome.results
            if outcome.verdict is Verdict.FAIL:
                assert outcome.error is not None
                raise outcome.error
            last = f"{node}: {outcome.message}"
            if outcome.verdict is Verdict.UNKNOWN and not idempotent:
                self.cluster.node_failed(node)
                raise errors.OutcomeUnknown(
                    f"write to rqlite may or may not have been applied ({last})"
                )
            yield from self._recover(node, outcome, attempt)
        raise errors.StoreUnavailable(
            f"rqlite cluster {self.url} accepted no write after "
            f"{self.target.retries + 1} tries; last error: {last}"
        )

    def _query_plan(self, statement: Statement, consistency: Consistency) -> Plan[list[Row]]:
        body = protocol.statements_body([statement])
        params = {**self._request_params(), "level": consistency.value}
        last = ""
        if self.cluster.leader is None:
            yield from self._discover_leader()
        for attempt in range(self.target.retries + 1):
            node = self.cluster.write_target()
            feedback = yield HttpCall("POST", node, "/db/query", params, body)
            assert feedback is not None
            outcome = protocol.classify(feedback, sql=[statement.sql])
            if outcome.verdict is Verdict.OK:
                assert outcome.results is not None
                return outcome.results[0].rows if outcome.results else []
            if outcome.verdict is Verdict.FAIL:
                assert outcome.error is not None
                raise outcome.error
            # A read changes nothing, so even an unknown outcome is safe to repeat.
            last = f"{node}: {outcome.message}"
            yield from self._recover(node, outcome, attempt)
        raise errors.StoreUnavailable(
            f"rqlite cluster {self.url} answered no read after "
            f"{self.target.retries + 1} tries; last error: {last}"
        )

    def _recover(self, node: str, outcome: protocol.Outcome, attempt: int) -> Plan[None]:
        """After a failed try: note the failure, look for the leader, back off."""
        if outcome.leader_hint:
            self.cluster.leader = outcome.leader_hint
            return
        self.cluster.node_failed(node)
        if attempt > 0:
            yield Pause(min(0.05 * 2**attempt, 1.0))
        yield from self._discover_leader()

    def _discover_leader(self) -> Plan[list[NodeInfo]]:
        """Ask the nodes, leader-first, who leads now; remember the answer."""
        for node in self.cluster.candidates():
            feedback = yield HttpCall(
                "GET", node, "/nodes", {"ver": "2"}, timeout=_DISCOVERY_TIMEOUT
            )
            if not isinstance(feedback, HttpReply) or feedback.status != 200:
                self.cluster.node_failed(node)
                continue
            nodes = protocol.parse_nodes(feedback.data, tls=self.target.tls)
            self.cluster.learn(nodes)
            if any(info.leader for info in nodes):
                return nodes
        return []

    def _nodes_plan(self) -> Plan[list[NodeInfo]]:
        nodes = yield from self._discover_leader()
        if not nodes:
            nodes = [
                NodeInfo(id="?", address=node, reachable=False, leader=False)
                for node in self.cluster.nodes
            ]
        described: list[NodeInfo] = []
        for info in nodes:
            feedback = yield HttpCall("GET", info.address, "/status", timeout=_DISCOVERY_TIMEOUT)
            if isinstance(feedback, HttpReply) and feedback.status == 200:
                raft_state, version = protocol.parse_status(feedback.data)
                described.append(
                    NodeInfo(
                        id=info.id,
                        address=info.address,
                        reachable=True,
                        leader=info.leader,
                        voter=info.voter,
                        raft_state=raft_state,
                        version=version,
                    )
                )
            else:
                error = getattr(feedback, "message", "") or getattr(feedback, "text", "")
                described.append(
                    NodeInfo(
                        id=info.id,
                        address=info.address,
                        reachable=False,
                        leader=False,
                        voter=info.voter,
                        error=str(error).strip()[:200],
                    )
                )
        return described
