"""The replicated store: plans of HTTP calls to an rqlite cluster.

It knows every node it was given (and every node the cluster reports), sends
writes straight to the leader, and when a node dies or leadership moves it
finds the new leader and tries again (``rqlite_failover.py``): while no
leader is known it asks a node who leads every 0.1 s, and tries as soon as
one is named, for as long as the store URL's ``retries`` allow. When every
node it knows refuses the connection, no node is electing: a request gives
up after that one round rather than wait. When the nodes that answer know no
leader and a majority of the voters are out of reach, no election can
complete: a read that may be stale goes to a survivor's copy at once, and
other requests give up once every node has been asked again after a poll
(``rqlite_failover.Quorum``). What it knows of the nodes is its
``rqlite_cluster.ClusterView``. A write whose outcome
is unknown is resent only when the caller said it is idempotent; otherwise
:class:`taskq.errors.OutcomeUnknown` tells the caller to check.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio

from taskq import errors
from taskq.broker.stores import rqlite_members as members
from taskq.broker.stores import rqlite_protocol as protocol
from taskq.broker.stores.http_plan import (
    HttpCall,
    HttpPlan,
    Transport,
    run_http_plan,
    run_http_plan_async,
)
from taskq.broker.stores.http_transport import HttpTransport, TransportOptions
from taskq.broker.stores.look_turns import LookTurns, cluster_turns
from taskq.broker.stores.rqlite_cluster import ClusterView
from taskq.broker.stores.rqlite_failover import LEADER_POLL_SECONDS, Failover, Quorum, Refusals
from taskq.broker.stores.rqlite_protocol import AnswerKind
from taskq.broker.stores.store import Consistency, NodeInfo, Row, Statement, StatementResult
from taskq.broker.stores.store_url import RqliteTarget, mask_password
from taskq.broker.stores.trampoline import Pause
from taskq.broker.stores.wake_hints import WakeListener, host_facing, look_seconds

# The requests of one store ask who leads about once a poll between them:
# at least this long after the last look, a little less than a poll, so that
# a request's own pause of one poll always ends in a look.
_LOOK_SPACING_SECONDS = 0.9 * LEADER_POLL_SECONDS


class RqliteStore:
    """A :class:`taskq.broker.stores.store.Store` over an rqlite cluster."""

    def __init__(
        self,
        target: RqliteTarget,
        *,
        display_url: str | None = None,
        transport: Transport | None = None,
        on_stale_read: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Reach the cluster ``target`` names.

        With ``on_stale_read``, a read the cluster cannot serve for want of a
        leader (once the failover tries are spent, or at once when too few
        voters are left to elect one) is answered from the local
        copy of a node that did answer (rqlite's level ``none``), and
        ``on_stale_read`` is told that node's address. Later reads then go
        to the same copy at once: a command waits out one election, not one
        per read, and sees one picture.

        ``clock`` (seconds, monotonic) bounds the failover; tests move it.
        """
        if target.tls and target.ca_file is not None and not os.path.isfile(target.ca_file):
            raise errors.ConfigError(
                f"rqlite store: ca_file {target.ca_file!r} is not a file (the CA to trust for TLS)"
            )
        self.target = target
        self._clock = clock
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
        # Options stay out of messages: they are the caller's tuning, not the store's name.
        named = display_url.partition("?")[0] if display_url else ",".join(target.base_urls())
        self._display_url = mask_password(named)
        self.cluster = ClusterView.of(target.base_urls(), clock())
        self._on_stale_read = on_stale_read
        self._stale_node: str | None = None
        self._wake_listener: WakeListener | None = None
        self._turns: LookTurns | None = None

    def look_turns(self) -> LookTurns:
        """The turn of the cluster's idle workers on this machine to claim (``look_turns``)."""
        if self._turns is None:
            self._turns = cluster_turns(self.target.nodes)
        return self._turns

    @property
    def url(self) -> str:
        return self._display_url

    # -- the Store interface: each entry point runs the same plan

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return run_http_plan(self._execute_plan(statements, idempotent), self._transport)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return await run_http_plan_async(
            self._execute_plan(statements, idempotent), self._transport
        )

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return run_http_plan(self._query_plan(statement, consistency), self._transport)

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return await run_http_plan_async(self._query_plan(statement, consistency), self._transport)

    def nodes(self) -> list[NodeInfo]:
        return run_http_plan(self._nodes_plan(), self._transport)

    async def nodes_async(self) -> list[NodeInfo]:
        return await run_http_plan_async(self._nodes_plan(), self._transport)

    def remove_node(self, node_id: str) -> list[NodeInfo]:
        """Take member ``node_id`` out of the cluster (rqlite's ``DELETE /remove``); who is left.

        Its process is not stopped: stop it (and never start it again with
        its data) once it is removed. Raises :class:`taskq.errors.NodeNotFound`
        for an id that is not a member, changing nothing.
        """
        return run_http_plan(self._remove_plan(node_id), self._transport)

    async def wait_for_change(self, timeout: float) -> None:
        # rqlite pushes nothing to clients: wait a poll interval, or less when
        # a hint comes, and let the caller's cheap read (at consistency none) decide.
        seconds = look_seconds(timeout, self._wake_listener)
        if self._wake_listener is None:
            await anyio.sleep(seconds)
        else:
            await self._wake_listener.wait(seconds)

    def listen_for_wakeups(self) -> str | None:
        """Listen for hints from submitting clients; where (host:port), or None if no socket."""
        if self._wake_listener is None:
            with contextlib.suppress(OSError):
                self._wake_listener = WakeListener(host_facing(self.cluster.write_target()))
        return None if self._wake_listener is None else self._wake_listener.address

    def close(self) -> None:
        if self._wake_listener is not None:
            self._wake_listener.close()
        self._transport.close()

    async def aclose(self) -> None:
        if self._wake_listener is not None:
            self._wake_listener.close()
        await self._transport.aclose()

    # -- plans

    def _request_params(self) -> dict[str, str]:
        return {"associative": "", "timeout": f"{self.target.timeout:g}s"}

    def _execute_plan(
        self, statements: Sequence[Statement], idempotent: bool
    ) -> HttpPlan[list[StatementResult]]:
        # /db/execute, not /db/request: in rqlite 10.2 a transactional
        # /db/request that meets a statement which fails to prepare (a
        # syntax error, an unknown column) commits the other statements;
        # /db/execute rolls the whole batch back on any error.
        request = _LeaderRequest(
            path="/db/execute",
            params={**self._request_params(), "transaction": ""},
            statements=statements,
            permission="execute",
            failed="accepted no write",
            repeatable=idempotent,
        )
        answer = yield from self._at_leader(request)
        if isinstance(answer, _Unanswered):
            raise self._unanswered(request, answer)
        return answer

    def _query_plan(self, statement: Statement, consistency: Consistency) -> HttpPlan[list[Row]]:
        request = _LeaderRequest(
            path="/db/query",
            params={**self._request_params(), "level": consistency.value},
            statements=[statement],
            permission="query",
            failed="answered no read",
            # A read changes nothing, so even an unknown outcome is safe to repeat.
            repeatable=True,
        )
        # Any node's copy answers a read at level none; one allowed a stale answer need
        # not wait for an election that cannot complete.
        request.leader_needed = consistency is not Consistency.NONE
        request.stale_ok = self._on_stale_read is not None and request.leader_needed
        if self._stale_node is not None and consistency is not Consistency.NONE:
            # Stale already: the rest of the reads come from the same copy at once.
            stale = yield from self._stale_read(self._stale_node, request)
            if stale is not None:
                return stale
        answer = yield from self._at_leader(request)
        if not isinstance(answer, _Unanswered):
            return answer[0].rows if answer else []
        if answer.leaderless is not None and consistency is not Consistency.NONE:
            stale = yield from self._stale_read(answer.leaderless, request)
            if stale is not None:
                return stale
        raise self._unanswered(request, answer)

    def _at_leader(self, request: _LeaderRequest) -> HttpPlan[list[StatementResult] | _Unanswered]:
        """The leader's results, trying again as failover allows; or why none came.

        An error the statements meet, a refusal, and an unknown outcome of a
        request that is not :attr:`_LeaderRequest.repeatable` are raised at once.
        """
        unanswered = _Unanswered(quorum=Quorum())
        refusals = Refusals(request.failed)
        failover = Failover(self.target.retries, self._clock)
        if self.cluster.leader is None or self.cluster.refresh_due(self._clock()):
            # No leader known, or time to see who belongs now: nodes come and go.
            yield from self._discover_leader(refusals, unanswered.quorum)
        while (yield from self._before_try(failover, refusals, unanswered.quorum, request)):
            node, outcome = yield from self._try_leader(refusals, unanswered.quorum, request)
            if outcome.kind is AnswerKind.OK:
                assert outcome.results is not None
                return outcome.results
            if outcome.kind is AnswerKind.FAIL:
                assert outcome.error is not None
                raise outcome.error
            if outcome.kind is AnswerKind.REFUSED:
                raise (yield from self._refused(node, outcome, request.permission))
            unanswered.last = f"{node}: {outcome.message}"
            if outcome.kind is AnswerKind.UNKNOWN and not request.repeatable:
                self.cluster.node_failed(node)
                raise errors.OutcomeUnknown(
                    f"write to rqlite may or may not have been applied ({unanswered.last})"
                )
            if outcome.no_leader:
                unanswered.leaderless = node
            self._failed(node, outcome, failover)
        unanswered.tries = failover.tries
        if unanswered.leaderless is None and unanswered.quorum.said:
            unanswered.leaderless = next(iter(unanswered.quorum.said))
        return unanswered

    def _unanswered(self, request: _LeaderRequest, unanswered: _Unanswered) -> errors.StoreError:
        """The error of a request that got no results: the cluster has no leader, if the
        nodes said so (and why none can be elected, if none can), else the last error."""
        quorum, nodes = unanswered.quorum, self.cluster.nodes
        if self.cluster.leader is None and quorum.lost():
            return errors.StoreUnavailable(
                f"rqlite cluster {self.url} has no leader: {quorum.without_leader(nodes)}; "
                "an election needs a majority: bring a node back"
            )
        if self.cluster.leader is None and quorum.said:
            return errors.StoreUnavailable(
                f"rqlite cluster {self.url} {request.failed} after {unanswered.tries} tries: "
                f"it has no leader: {quorum.without_leader(nodes)}, and none was elected"
            )
        return errors.StoreUnavailable(
            f"rqlite cluster {self.url} {request.failed} after "
            f"{unanswered.tries} tries; last error: {unanswered.last}"
        )

    def _try_leader(
        self, refusals: Refusals, quorum: Quorum, request: _LeaderRequest
    ) -> HttpPlan[tuple[str, protocol.RqliteAnswer]]:
        """One try at the node taken for the leader: its answer.

        Raises StoreUnavailable instead once every node has refused the connection.
        """
        if refusals.everywhere(self.cluster.nodes):
            raise refusals.error(self.url, self.cluster.nodes)
        node = self.cluster.write_target()
        feedback = yield HttpCall("POST", node, request.path, request.params, request.body)
        assert feedback is not None
        answer = protocol.read_answer(feedback, sql=request.sql)
        refusals.note(node, answer)
        quorum.note(node, answer)
        return node, answer

    def _stale_read(self, node: str, request: _LeaderRequest) -> HttpPlan[list[Row] | None]:
        """The read from ``node``'s own copy, if stale reads are allowed; None if it fails."""
        if self._on_stale_read is None:
            return None
        params = {**self._request_params(), "level": Consistency.NONE.value}
        feedback = yield HttpCall("POST", node, "/db/query", params, request.body)
        assert feedback is not None
        outcome = protocol.read_answer(feedback, sql=request.sql)
        if outcome.kind is AnswerKind.FAIL:
            assert outcome.error is not None
            raise outcome.error
        if outcome.kind is not AnswerKind.OK:
            return None
        assert outcome.results is not None
        if self._stale_node is None:
            self._stale_node = node
            self._on_stale_read(node)
        return outcome.results[0].rows if outcome.results else []

    def _failed(self, node: str, outcome: protocol.RqliteAnswer, failover: Failover) -> None:
        """Note what a failed try says of the cluster (who leads, or who is failing)."""
        failover.failed()
        if outcome.leader_hint:
            self.cluster.leader = outcome.leader_hint
        else:
            self.cluster.node_failed(node)

    def _before_try(
        self, failover: Failover, refusals: Refusals, quorum: Quorum, request: _LeaderRequest
    ) -> HttpPlan[bool]:
        """Whether to try (again); before a retry, wait until a node names a leader.

        The first retry goes at once: a leader that moved is found by asking.
        Later ones wait :data:`LEADER_POLL_SECONDS` first, so a node that
        answers 503 (a leader just elected, not yet taking writes) is asked
        again soon but not in a busy loop. While no leader is known, some
        node is asked who leads every :data:`LEADER_POLL_SECONDS`, and the
        retry goes as soon as one is named. Past the deadline the retry goes
        to whichever node seems best, as a last try. While no election can
        complete (:class:`Quorum`), a read that may be stale tries no more,
        and other requests stop once every node asked again agrees.
        """
        if not failover.tries:
            return True
        if failover.spent():
            return False
        if refusals.everywhere(self.cluster.nodes):
            return True  # no wait: the try is given up on at once
        if failover.tries > 1 and failover.pause() and not self._hopeless(request, quorum):
            yield Pause(failover.pause())
        while (
            self.cluster.leader is None and failover.pause() and not self._hopeless(request, quorum)
        ):
            if failover.clock() - self.cluster.looked_at >= _LOOK_SPACING_SECONDS:
                self.cluster.looked_at = failover.clock()
                yield from members.look_for_leader(
                    self.cluster, tls=self.target.tls, refusals=refusals, quorum=quorum
                )
                if (
                    self.cluster.leader is not None
                    or refusals.everywhere(self.cluster.nodes)
                    or self._hopeless(request, quorum)
                ):
                    break
            yield Pause(failover.pause())
        if self._hopeless(request, quorum):
            return not request.stale_ok and not (yield from self._still_lost(refusals, quorum))
        return True

    def _hopeless(self, request: _LeaderRequest, quorum: Quorum) -> bool:
        """Whether ``request`` needs a leader, and no election can complete to give it one."""
        return request.leader_needed and self.cluster.leader is None and quorum.lost()

    def _still_lost(self, refusals: Refusals, quorum: Quorum) -> HttpPlan[bool]:
        """Whether no election can complete still, once every node is asked again after a poll.

        The nodes that answer are asked their raft state too, for the error.
        """
        yield Pause(LEADER_POLL_SECONDS)
        quorum.ask_again()
        yield from self._discover_leader(refusals, quorum)
        if self.cluster.leader is not None or not quorum.lost():
            return False
        yield from members.raft_states(quorum)
        return True

    def _refused(
        self, node: str, outcome: protocol.RqliteAnswer, permission: str
    ) -> HttpPlan[errors.StoreError]:
        return members.refusal(node, outcome, username=self.target.username, permission=permission)

    def _discover_leader(self, refusals: Refusals, quorum: Quorum) -> HttpPlan[list[NodeInfo]]:
        """Ask the nodes, leader-first, who belongs and leads now; remember the answer."""
        return members.discover_leader(
            self.cluster, tls=self.target.tls, now=self._clock(), refusals=refusals, quorum=quorum
        )

    def _nodes_plan(self) -> HttpPlan[list[NodeInfo]]:
        return members.describe(
            self.cluster, tls=self.target.tls, username=self.target.username, now=self._clock()
        )

    def _remove_plan(self, node_id: str) -> HttpPlan[list[NodeInfo]]:
        return members.remove(
            self.cluster,
            node_id,
            tls=self.target.tls,
            username=self.target.username,
            now=self._clock(),
        )


class _LeaderRequest:
    """One request for the leader: where it goes, what it sends, what it needs, how it fails."""

    def __init__(
        self,
        *,
        path: str,
        params: dict[str, str],
        statements: Sequence[Statement],
        permission: str,
        failed: str,
        repeatable: bool,
    ) -> None:
        self.path = path
        self.params = params
        self.body = protocol.statements_body(statements)
        self.sql = [statement.sql for statement in statements]
        self.permission = permission  # the one rqlite must grant, named in a refusal
        self.failed = failed  # what the caller did not get, as "answered no read"
        self.repeatable = repeatable  # resent after an unknown outcome
        self.leader_needed = True  # False for a read any node's own copy answers
        self.stale_ok = False  # a read that a node's own copy may answer when no leader can


@dataclass
class _Unanswered:
    """Why the leader gave no results: the tries, the last error, a node that knew no leader,
    and what the nodes said of an election."""

    quorum: Quorum
    tries: int = 0
    last: str = ""
    leaderless: str | None = None
