"""A cluster that cannot elect a leader: too few voters left for a majority.

Two of three nodes are down and the third answers as a candidate. A read
that may be stale is answered from the survivor's copy at once, a write
gives up once every node has been asked again after a poll, and the errors
say that the cluster has no leader rather than blame a dead node. A leader's
loss with a majority left is ridden out as before. The cluster is scripted
and the store's clock moves only when a plan pauses; the real cluster is in
tests/integration/test_rqlite_no_quorum.py.
"""

from __future__ import annotations

import pytest

from taskq import errors
from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure
from taskq.broker.stores.rqlite_failover import LEADER_POLL_SECONDS, failover_budget
from taskq.broker.stores.store import Consistency, Statement
from tests.support import scripted_rqlite as scripted
from tests.support.scripted_rqlite import FakeTime, scripted_store

A, B, C = "http://a:4001", "http://b:4001", "http://c:4001"
URL = "rqlite://a:4001,b:4001,c:4001"
INSERT = Statement("INSERT INTO t VALUES (1)")
SELECT = Statement("SELECT n FROM t")
ROWS = {"results": [{"rows": [{"n": 1}]}]}
NO_LEADER = (
    f"rqlite cluster {URL} has no leader: 1 of 3 nodes answers (c:4001, a candidate: leader not "
    "found) and 2 refuse connections; an election needs a majority: bring a node back"
)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    return scripted.fake_clock(monkeypatch)


def _members(down: set[str], leader: str | None) -> dict[str, object]:
    """``/nodes`` as a live node answers it: the dead listed by raft address, unreachable."""
    listed: list[dict[str, object]] = []
    for node in (A, B, C):
        host = node[7]
        entry: dict[str, object] = {"id": f"node-{host}", "addr": f"{host}:4002", "voter": True}
        if node in down:
            error = f"dial tcp {host}:4002: connect: connection refused"
            entry.update(reachable=False, leader=False, error=error)
        else:
            entry.update(api_addr=node, reachable=True, leader=node == leader)
        listed.append(entry)
    return {"nodes": listed}


def _cluster(
    clock: FakeTime, down: set[str], elected: tuple[str, float] | None = None
) -> scripted.Answer:
    """Nodes ``down`` refuse connections; ``elected`` is (the leader, when it is elected)."""

    def answer(call: HttpCall) -> HttpReply | SendFailure:
        leader = elected[0] if elected is not None and clock.now >= elected[1] else None
        dead = down - {leader}  # an elected node came back to be elected
        if call.base_url in dead:
            return scripted.nothing_listens(call)
        if call.path == "/nodes":
            return scripted.json_reply(200, _members(dead, leader))
        if call.path == "/status":
            state = "Leader" if call.base_url == leader else "Candidate"
            return scripted.json_reply(200, {"store": {"raft": {"state": state}}})
        if call.params.get("level") == "none":
            return scripted.json_reply(200, ROWS)
        if leader is None:
            return scripted.text_reply(503, "leader not found")
        return scripted.json_reply(200, ROWS if call.path == "/db/query" else {"results": [{}]})

    return answer


def _looks(seen: list[HttpCall]) -> list[str]:
    return [call.base_url for call in seen if call.path == "/nodes"]


def test_a_read_that_may_be_stale_goes_to_the_survivors_copy_at_once(clock: FakeTime) -> None:
    told: list[str] = []
    store, transport = scripted_store(
        _cluster(clock, down={A, B}), URL, on_stale_read=told.append, clock=clock.monotonic
    )
    assert store.query(SELECT) == [{"n": 1}]
    assert told == [C]
    # One look at every node, one try: none of the failover budget (11.5 s) is spent.
    assert clock.now < LEADER_POLL_SECONDS < failover_budget(store.target.retries)
    assert sorted(_looks(transport.seen)) == [A, B, C]
    assert transport.posts() == [(C, "weak"), (C, "none")]

    # A survivor that will be elected (a majority is left) is waited for, as before.
    told.clear()
    store, transport = scripted_store(
        _cluster(clock, down={A}, elected=(B, clock.now + 1.03)),
        URL,
        on_stale_read=told.append,
        clock=clock.monotonic,
    )
    assert store.query(SELECT) == [{"n": 1}]
    assert told == []
    assert transport.posts()[-1] == (B, "weak")


def test_a_write_without_quorum_gives_up_once_every_node_is_asked_again(clock: FakeTime) -> None:
    store, transport = scripted_store(
        _cluster(clock, down={A, B}), URL, display_url=URL, clock=clock.monotonic
    )
    with pytest.raises(errors.StoreUnavailable) as failed:
        store.execute([INSERT])
    assert str(failed.value) == NO_LEADER
    # After one poll, every node was asked again before giving up; the budget stays unspent.
    assert clock.pauses == [LEADER_POLL_SECONDS]
    assert sorted(_looks(transport.seen)[3:]) == [A, B, C]
    assert len(transport.posts()) == 1

    # A node back by the second look, and elected: the write goes to it.
    store, transport = scripted_store(
        _cluster(clock, down={A, B}, elected=(B, clock.now + LEADER_POLL_SECONDS)),
        URL,
        clock=clock.monotonic,
    )
    store.execute([INSERT])
    assert transport.posts()[-1] == (B, "")


def test_a_leader_lost_with_a_majority_left_is_still_waited_for(clock: FakeTime) -> None:
    # The leader A dies; B and C elect B after 1.03 s: the write waits for it.
    store, transport = scripted_store(
        _cluster(clock, down={A}, elected=(B, 1.03)), URL, clock=clock.monotonic
    )
    store.cluster.leader = A
    store.execute([INSERT])
    assert 1.03 <= clock.now < 1.03 + LEADER_POLL_SECONDS
    assert transport.posts()[-1] == (B, "")

    # Two of three down: the same write gives up after one more poll, saying why.
    store, transport = scripted_store(
        _cluster(clock, down={A, B}), URL, display_url=URL, clock=clock.monotonic
    )
    store.cluster.leader = A
    start = clock.now
    with pytest.raises(errors.StoreUnavailable, match="has no leader: 1 of 3 nodes answers"):
        store.execute([INSERT])
    assert clock.now - start < 2 * LEADER_POLL_SECONDS

    # A read at level none needs no leader: it finds C's copy, and does not give up.
    store, transport = scripted_store(_cluster(clock, down={A, B}), URL, clock=clock.monotonic)
    store.cluster.leader = A
    assert store.query(SELECT, consistency=Consistency.NONE) == [{"n": 1}]
    assert transport.posts()[-1] == (C, "none")


def test_a_request_that_spent_its_failover_says_the_cluster_has_no_leader(
    clock: FakeTime,
) -> None:
    # A majority answers but elects no one: the budget is spent, and the error says so.
    store, _ = scripted_store(
        _cluster(clock, down={A}), f"{URL}?retries=3", display_url=URL, clock=clock.monotonic
    )
    with pytest.raises(errors.StoreUnavailable) as failed:
        store.execute([INSERT])
    assert clock.now == pytest.approx(failover_budget(3))
    message = str(failed.value)
    assert message.startswith(f"rqlite cluster {URL} accepted no write after ")
    assert "it has no leader: 2 of 3 nodes answer (b:4001" in message
    assert "and 1 refuses connections, and none was elected" in message
    assert "ConnectionRefused" not in message
