"""The rqlite transport's decisions, with the cluster's answers scripted by MockTransport.

These check the client's choices (where a write goes, what is retried, what
raises); the real cluster's behaviour is checked in tests/integration.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

from taskq import errors
from taskq.broker.rqlite_store import RqliteStore
from taskq.broker.store import Consistency, Statement
from taskq.broker.store_url import parse_store_url

A, B, C = "http://a:4001", "http://b:4001", "http://c:4001"
INSERT = Statement("INSERT INTO t (name) VALUES (:name)", {"name": "x"})
OK_WRITE = {"results": [{"last_insert_id": 7, "rows_affected": 1}]}


@dataclass
class FakeCluster:
    """Scripted answers per (node, path); records every request it saw."""

    leader: str = B
    down: set[str] = field(default_factory=set)
    answers: dict[str, list[Callable[[httpx.Request], httpx.Response]]] = field(
        default_factory=dict
    )
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        node = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        self.seen.append((request.method, node, request.url.path))
        if node in self.down:
            raise httpx.ConnectError("Connection refused", request=request)
        if request.url.path == "/nodes":
            return httpx.Response(200, json={"nodes": self._nodes()})
        scripted = self.answers.get(request.url.path)
        if scripted:
            return scripted.pop(0)(request)
        return httpx.Response(200, json=OK_WRITE)

    def _nodes(self) -> list[dict[str, object]]:
        return [
            {
                "id": node[7],
                "api_addr": node,
                "addr": node.replace("4001", "4002"),
                "voter": True,
                "reachable": node not in self.down,
                "leader": node == self.leader,
            }
            for node in (A, B, C)
        ]

    def posts(self) -> list[str]:
        return [node for method, node, _ in self.seen if method == "POST"]


def _store(cluster: FakeCluster, url: str = "rqlite://a:4001,b:4001,c:4001") -> RqliteStore:
    target = parse_store_url(url + ("&" if "?" in url else "?") + "retries=3")
    assert not isinstance(target, type(None))
    return RqliteStore(target, transport=httpx.MockTransport(cluster.handle))  # type: ignore[arg-type]


def _reply(status: int, body: object) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body)


def _raise(exc_type: type[httpx.HTTPError]) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        raise exc_type("boom", request=request)

    return answer


def test_writes_go_straight_to_the_leader_as_one_transaction() -> None:
    cluster = FakeCluster(leader=C)
    store = _store(cluster)
    [result] = store.execute([INSERT])
    assert result.last_insert_id == 7
    assert cluster.posts() == [C]
    store.close()


def test_request_carries_statements_params_and_transaction_flag() -> None:
    cluster = FakeCluster()
    captured: list[httpx.Request] = []

    def capture(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        return httpx.Response(200, json=OK_WRITE)

    cluster.answers["/db/execute"] = [capture]
    _store(cluster).execute([INSERT])
    [request] = captured
    assert "transaction" in request.url.params
    assert json.loads(request.content) == [["INSERT INTO t (name) VALUES (:name)", {"name": "x"}]]


def test_dead_leader_fails_over_to_the_new_one() -> None:
    cluster = FakeCluster(leader=B)
    store = _store(cluster)
    store.execute([INSERT])
    cluster.down.add(B)
    cluster.leader = A
    store.execute([INSERT])
    assert cluster.posts() == [B, B, A]


def test_no_leader_yet_is_retried_and_then_succeeds() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [
        _reply(503, None),
        lambda request: httpx.Response(503, text="leader not found"),
    ]
    [result] = _store(cluster).execute([INSERT])
    assert result.rows_affected == 1
    assert len(cluster.posts()) == 3


def test_leadership_lost_while_committing_is_unknown_and_not_resent() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [
        _reply(200, {"error": "leadership lost while committing log"})
    ]
    with pytest.raises(errors.OutcomeUnknown, match="leadership lost"):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 1


def test_idempotent_write_is_resent_after_an_unknown_outcome() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [
        _reply(200, {"error": "leadership lost while committing log"})
    ]
    [result] = _store(cluster).execute([INSERT], idempotent=True)
    assert result.rows_affected == 1
    assert len(cluster.posts()) == 2


def test_timeout_after_sending_is_unknown() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [_raise(httpx.ReadTimeout)]
    with pytest.raises(errors.OutcomeUnknown, match="ReadTimeout"):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 1


def test_not_the_leader_refusal_is_safe_to_resend() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [_reply(200, {"error": "node is not the leader"})]
    _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 2


def test_statement_error_names_its_index_and_is_not_retried() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [
        _reply(
            200,
            {"results": [{"rows_affected": 1}, {"error": "UNIQUE constraint failed: t.name"}]},
        )
    ]
    with pytest.raises(errors.ConstraintViolation) as caught:
        _store(cluster).execute([INSERT, INSERT])
    assert caught.value.index == 1
    assert caught.value.sql == INSERT.sql
    assert len(cluster.posts()) == 1


def test_syntax_error_is_a_plain_statement_error() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [
        _reply(200, {"results": [{"error": 'near "SELEC": syntax error'}]})
    ]
    with pytest.raises(errors.StatementError) as caught:
        _store(cluster).execute([INSERT])
    assert not isinstance(caught.value, errors.ConstraintViolation)


def test_bad_credentials_fail_at_once() -> None:
    cluster = FakeCluster()
    cluster.answers["/db/execute"] = [lambda request: httpx.Response(401)]
    with pytest.raises(errors.StoreAuthError):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 1


def test_basic_auth_is_sent() -> None:
    cluster = FakeCluster()
    headers: list[str] = []

    def capture(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers.get("authorization", ""))
        return httpx.Response(200, json=OK_WRITE)

    cluster.answers["/db/execute"] = [capture]
    _store(cluster, "rqlite://bob:s3cret@a:4001,b:4001,c:4001").execute([INSERT])
    assert headers == ["Basic " + base64.b64encode(b"bob:s3cret").decode()]


def test_unreachable_cluster_gives_up_after_bounded_tries() -> None:
    cluster = FakeCluster(down={A, B, C})
    with pytest.raises(errors.StoreUnavailable, match="Connection refused"):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 4  # retries=3 means four tries in all


def test_redirect_points_at_the_leader() -> None:
    cluster = FakeCluster(leader=A)
    cluster.answers["/db/execute"] = [
        lambda request: httpx.Response(301, headers={"Location": f"{C}/db/request?transaction"})
    ]
    _store(cluster).execute([INSERT])
    assert cluster.posts() == [A, C]


def test_reads_are_retried_even_when_the_outcome_is_unknown() -> None:
    cluster = FakeCluster()
    levels: list[str] = []

    def rows(request: httpx.Request) -> httpx.Response:
        levels.append(request.url.params["level"])
        return httpx.Response(
            200, json={"results": [{"types": {"n": "integer"}, "rows": [{"n": 1}]}]}
        )

    cluster.answers["/db/query"] = [_raise(httpx.ReadTimeout), rows]
    assert _store(cluster).query(
        Statement("SELECT 1 AS n"), consistency=Consistency.LINEARIZABLE
    ) == [{"n": 1}]
    assert levels == ["linearizable"]


def test_async_driver_makes_the_same_decisions() -> None:
    cluster = FakeCluster(leader=A)
    cluster.answers["/db/execute"] = [
        _reply(200, {"error": "leadership lost while committing log"})
    ]
    store = _store(cluster)

    async def scenario() -> None:
        with pytest.raises(errors.OutcomeUnknown):
            await store.execute_async([INSERT])
        cluster.down.add(A)
        cluster.leader = C
        [result] = await store.execute_async([INSERT])
        assert result.last_insert_id == 7
        await store.aclose()

    anyio.run(scenario)
    assert cluster.posts() == [A, C]
