"""The rqlite store's decisions, with the cluster's answers scripted call by call.

These check the client's choices (where a write goes, what is retried, what
raises); the real cluster's behaviour is checked in tests/integration.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from taskq import errors
from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure, SendStage
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import Consistency, Statement
from taskq.broker.stores.store_url import RqliteTarget, parse_store_url

A, B, C = "http://a:4001", "http://b:4001", "http://c:4001"
INSERT = Statement("INSERT INTO t (name) VALUES (:name)", {"name": "x"})
OK_WRITE = {"results": [{"last_insert_id": 7, "rows_affected": 1}]}

Answer = Callable[[HttpCall], HttpReply | SendFailure]


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> HttpReply:
    return HttpReply(status, body, json.dumps(body), headers or {})


@dataclass
class FakeCluster:
    """Scripted answers per (node, path); records every request it saw."""

    leader: str = B
    down: set[str] = field(default_factory=set)
    answers: dict[str, list[Answer]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def send(self, call: HttpCall) -> HttpReply | SendFailure:
        self.seen.append((call.method, call.base_url, call.path))
        if call.base_url in self.down:
            return SendFailure(SendStage.NOT_SENT, "ConnectionRefusedError: Connection refused")
        if call.path == "/nodes":
            return _json(200, {"nodes": self._nodes()})
        scripted = self.answers.get(call.path)
        if scripted:
            return scripted.pop(0)(call)
        return _json(200, OK_WRITE)

    async def send_async(self, call: HttpCall) -> HttpReply | SendFailure:
        return self.send(call)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

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
    assert isinstance(target, RqliteTarget)
    return RqliteStore(target, transport=cluster)


def _reply(status: int, body: object) -> Answer:
    return lambda call: _json(status, body)


def _timeout(call: HttpCall) -> SendFailure:
    return SendFailure(SendStage.SENT, "TimeoutError: timed out")


def test_writes_go_straight_to_the_leader_as_one_transaction() -> None:
    cluster = FakeCluster(leader=C)
    store = _store(cluster)
    [result] = store.execute([INSERT])
    assert result.last_insert_id == 7
    assert cluster.posts() == [C]
    store.close()


def test_request_carries_statements_params_and_transaction_flag() -> None:
    cluster = FakeCluster()
    captured: list[HttpCall] = []

    def capture(call: HttpCall) -> HttpReply:
        captured.append(call)
        return _json(200, OK_WRITE)

    cluster.answers["/db/execute"] = [capture]
    _store(cluster).execute([INSERT])
    [call] = captured
    assert "transaction" in call.params
    assert call.body == [["INSERT INTO t (name) VALUES (:name)", {"name": "x"}]]


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
        lambda call: HttpReply(503, None, "leader not found"),
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
    cluster.answers["/db/execute"] = [_timeout]
    with pytest.raises(errors.OutcomeUnknown, match="timed out"):
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
    cluster.answers["/db/execute"] = [lambda call: HttpReply(401, None, "")]
    with pytest.raises(errors.StoreAuthError):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 1


def test_unreachable_cluster_gives_up_after_bounded_tries() -> None:
    cluster = FakeCluster(down={A, B, C})
    with pytest.raises(errors.StoreUnavailable, match="Connection refused"):
        _store(cluster).execute([INSERT])
    assert len(cluster.posts()) == 4  # retries=3 means four tries in all


def test_redirect_points_at_the_leader() -> None:
    cluster = FakeCluster(leader=A)
    cluster.answers["/db/execute"] = [
        lambda call: HttpReply(301, None, "", {"location": f"{C}/db/request?transaction"})
    ]
    _store(cluster).execute([INSERT])
    assert cluster.posts() == [A, C]


def test_reads_are_retried_even_when_the_outcome_is_unknown() -> None:
    cluster = FakeCluster()
    levels: list[str] = []

    def rows(call: HttpCall) -> HttpReply:
        levels.append(call.params["level"])
        return _json(200, {"results": [{"types": {"n": "integer"}, "rows": [{"n": 1}]}]})

    cluster.answers["/db/query"] = [_timeout, rows]
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


def test_a_missing_ca_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    target = parse_store_url(f"rqlites://a:4001?ca_file={missing}")
    assert isinstance(target, RqliteTarget)
    with pytest.raises(errors.ConfigError, match=r"no-such-ca\.pem"):
        RqliteStore(target)
