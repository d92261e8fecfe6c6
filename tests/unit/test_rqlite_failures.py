"""How the rqlite store fails: refusals told apart, failover paced, stale reads on request.

The cluster's answers are scripted per request, and the store's clock moves
only when a plan pauses; the real cluster's behaviour is checked in
tests/integration/test_rqlite_errors.py.
"""

from __future__ import annotations

import pytest

from taskq import errors
from taskq.broker.stores import trampoline
from taskq.broker.stores.http_plan import HttpCall, HttpPlan, HttpReply, SendFailure, SendStage
from taskq.broker.stores.rqlite_cluster import with_known_addresses
from taskq.broker.stores.rqlite_failover import LEADER_POLL_SECONDS, failover_budget
from taskq.broker.stores.store import NodeInfo, Statement
from taskq.broker.stores.store_url import RqliteTarget, parse_store_url
from tests.support.scripted_rqlite import Answer, FakeTime, Scripted, fake_clock
from tests.support.scripted_rqlite import connect_timed_out as _connect_timed_out
from tests.support.scripted_rqlite import json_reply as _json
from tests.support.scripted_rqlite import nothing_listens as _nothing_listens
from tests.support.scripted_rqlite import refused as _refused
from tests.support.scripted_rqlite import scripted_store as _store
from tests.support.scripted_rqlite import text_reply as _text

A, B, C = "http://a:4001", "http://b:4001", "http://c:4001"
INSERT = Statement("INSERT INTO t VALUES (1)")
SELECT = Statement("SELECT n FROM t")
ROWS = {"results": [{"rows": [{"n": 1}]}]}


def _members(leader: str | None) -> dict[str, object]:
    return {
        "nodes": [
            {"id": f"node-{node[7]}", "api_addr": node, "addr": f"{node[7]}:4002",
             "reachable": True, "leader": node == leader}
            for node in (A, B, C)
        ]
    }  # fmt: skip


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    """The time of the stores made with ``clock=clock.monotonic``; their pauses move it."""
    return fake_clock(monkeypatch)


# -- refusals --------------------------------------------------------------------------------


def test_a_401_without_credentials_asks_for_them_in_one_clean_line() -> None:
    store, _ = _store(lambda call: _json(200, _members(A)) if call.path == "/nodes" else _text(401))
    with pytest.raises(errors.StoreAuthError) as refused:
        store.execute([INSERT])
    message = str(refused.value)
    assert A in message
    assert "HTTP 401)" in message  # rqlite sends no body: no empty ": " after it
    assert "user:password@" in message


def test_a_wrong_password_is_an_auth_error_naming_the_user() -> None:
    store, _ = _store(
        lambda call: _json(200, _members(A)) if call.path == "/nodes" else _text(401),
        "rqlite://bob:secret@a:4001",
    )
    with pytest.raises(errors.StoreAuthError, match="refused the password of user 'bob'") as bad:
        store.query(SELECT)
    assert "secret" not in str(bad.value)


def test_good_credentials_short_of_a_permission_are_permission_denied() -> None:
    def answer(call: HttpCall) -> HttpReply:
        if call.path == "/nodes":
            return _json(200, _members(A))
        if call.path == "/db/execute":
            return _text(401)
        return _json(200, ROWS)  # the same user may read

    store, transport = _store(answer, "rqlite://reader:pw@a:4001")
    with pytest.raises(errors.StorePermissionDenied) as denied:
        store.execute([INSERT])
    assert "user 'reader'" in str(denied.value)
    assert "'execute' permission" in str(denied.value)
    assert not isinstance(denied.value, errors.StoreAuthError)
    assert transport.posts()[0] == (A, "")  # one write, no retry of a refusal


def test_a_403_is_permission_denied_at_once() -> None:
    store, _ = _store(
        lambda call: _json(200, _members(A)) if call.path == "/nodes" else _text(403, "forbidden"),
        "rqlite://bob:pw@a:4001",
    )
    with pytest.raises(errors.StorePermissionDenied, match=r"HTTP 403: forbidden\)"):
        store.query(SELECT)


# -- failover ---------------------------------------------------------------------------------


def test_the_default_retries_wait_out_an_election_of_ten_seconds() -> None:
    target = parse_store_url("rqlite://a:4001")
    assert isinstance(target, RqliteTarget)
    assert failover_budget(target.retries) == 11.5  # 0.5 + 1 + 2 x 5: the pauses of old
    assert failover_budget(1) == failover_budget(0) == 0


def _elected_at(clock: FakeTime, leader: str, seconds: float) -> Answer:
    """A cluster whose leader A was killed and whose ``leader`` is elected ``seconds`` later."""

    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.base_url == A:
            return _nothing_listens(call)
        if clock.now < seconds:
            return _json(200, _members(None)) if call.path == "/nodes" else _text(503)
        if call.path == "/nodes":
            return _json(200, _members(leader))
        return _json(200, {"results": [{"rows_affected": 1}]})

    return answer


def test_a_write_goes_to_the_new_leader_as_soon_as_a_node_names_it(clock: FakeTime) -> None:
    store, transport = _store(_elected_at(clock, B, 1.03), clock=clock.monotonic)
    store.cluster.leader = A
    store.execute([INSERT])
    # Within one poll of the election, not on a step of a back-off schedule.
    assert 1.03 <= clock.now < 1.03 + LEADER_POLL_SECONDS
    assert transport.posts() == [(A, ""), (B, "")]
    assert set(clock.pauses) == {LEADER_POLL_SECONDS}
    looks = [call.base_url for call in transport.seen if call.path == "/nodes"]
    # One question per poll, taken in turns by the survivors; the dead node is left alone.
    assert len(looks) == len(clock.pauses) + 1
    assert {B, C} == set(looks)
    assert max(looks.count(B), looks.count(C)) - min(looks.count(B), looks.count(C)) <= 1


def test_a_new_leader_that_answers_503_is_asked_again_within_a_poll(clock: FakeTime) -> None:
    ready_at = 0.45

    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.path == "/nodes":
            return _json(200, _members(B))
        if clock.now < ready_at:
            return _text(503, "leader not found")
        return _json(200, {"results": [{"rows_affected": 1}]})

    store, transport = _store(answer, clock=clock.monotonic)
    store.execute([INSERT])
    assert ready_at <= clock.now < ready_at + LEADER_POLL_SECONDS
    assert {node for node, _ in transport.posts()} == {B}
    assert set(clock.pauses) == {LEADER_POLL_SECONDS}


def test_a_write_of_unknown_outcome_is_not_resent_while_a_leader_is_found(
    clock: FakeTime,
) -> None:
    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.path == "/nodes":
            return _json(200, _members(B))
        return SendFailure(SendStage.SENT, "ConnectionResetError: reset by peer")

    store, transport = _store(answer, clock=clock.monotonic)
    store.cluster.leader = A
    with pytest.raises(errors.OutcomeUnknown):
        store.execute([INSERT])
    assert transport.posts() == [(A, "")]
    assert clock.pauses == []


def test_without_a_leader_a_write_gives_up_when_the_budget_is_spent(clock: FakeTime) -> None:
    store, transport = _store(
        _elected_at(clock, B, float("inf")), "rqlite://a:4001,b:4001,c:4001?retries=4",
        clock=clock.monotonic,
    )  # fmt: skip
    store.cluster.leader = A
    with pytest.raises(errors.StoreUnavailable, match="accepted no write after 5 tries"):
        store.execute([INSERT])
    # The budget of retries=4, then the tries it still owes, at once: no pause after the last.
    assert clock.now == pytest.approx(failover_budget(4))
    assert len(transport.posts()) == 5
    assert max(clock.pauses) <= LEADER_POLL_SECONDS


def test_a_small_retries_still_makes_its_quick_tries(clock: FakeTime) -> None:
    store, transport = _store(_refused, "rqlite://a:4001,b:4001?retries=1", clock=clock.monotonic)
    with pytest.raises(errors.StoreUnavailable, match="after 2 tries"):
        store.execute([INSERT])
    assert len(transport.posts()) == 2
    assert clock.pauses == []


def test_a_write_rides_through_an_election(clock: FakeTime) -> None:
    elected: list[str] = []

    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.base_url == A:
            return _refused(call)  # the old leader, killed
        if call.path == "/nodes":
            # The new leader appears after a few looks.
            return _json(200, _members(B if clock.now >= 1.2 else None))
        if call.path == "/db/execute" and clock.now < 1.2:
            return _text(503, "leader not found")
        elected.append(call.base_url)
        return _json(200, {"results": [{"rows_affected": 1}]})

    store, _ = _store(answer, clock=clock.monotonic)
    store.cluster.leader = A
    store.execute([INSERT])
    assert elected == [B]


def _run_together(plans: list[HttpPlan[object]], transport: Scripted, clock: FakeTime) -> None:
    """Run ``plans`` as concurrent tasks would, on the fake clock: calls take no time."""
    wake = [0.0] * len(plans)
    steps: list[object] = [next(plan) for plan in plans]
    while any(step is not None for step in steps):
        index = min((i for i, step in enumerate(steps) if step is not None), key=wake.__getitem__)
        clock.now = max(clock.now, wake[index])
        step, answer = steps[index], None
        if isinstance(step, trampoline.Pause):
            wake[index] = clock.now + step.seconds
        else:
            assert isinstance(step, HttpCall)
            answer = transport.send(step)
        try:
            steps[index] = plans[index].send(answer)
        except StopIteration:
            steps[index] = None


def test_the_requests_of_one_store_share_their_looks_for_a_leader(clock: FakeTime) -> None:
    store, transport = _store(_elected_at(clock, B, 0.5), clock=clock.monotonic)
    store.cluster.leader = A
    plans = [store._execute_plan([INSERT], idempotent=True) for _ in range(4)]
    _run_together(plans, transport, clock)  # type: ignore[arg-type]
    assert [node for node, _ in transport.posts()].count(B) == 4
    looks = [call for call in transport.seen if call.path == "/nodes"]
    assert len(looks) <= 0.5 / LEADER_POLL_SECONDS + 2  # about one a poll, not one per request


def test_a_cluster_where_nothing_listens_is_given_up_on_after_one_round(clock: FakeTime) -> None:
    store, transport = _store(_nothing_listens, clock=clock.monotonic)
    with pytest.raises(errors.StoreUnavailable, match="every node refused the connection"):
        store.execute([INSERT])
    # Asked once each who leads; no try, no pause.
    assert [(call.base_url, call.path) for call in transport.seen] == [
        (A, "/nodes"),
        (B, "/nodes"),
        (C, "/nodes"),
    ]
    assert clock.pauses == []

    # A leader that was known: its refusal, then one look at each of the others.
    store, transport = _store(_nothing_listens, clock=clock.monotonic)
    store.cluster.leader = A
    with pytest.raises(errors.StoreUnavailable, match="answered no read: every node refused"):
        store.query(SELECT)
    assert [(call.base_url, call.path) for call in transport.seen] == [
        (A, "/db/query"),
        (B, "/nodes"),
        (C, "/nodes"),
        (A, "/nodes"),
    ]
    assert clock.pauses == []


@pytest.mark.parametrize("the_rest", [_connect_timed_out, lambda call: _text(503, "no leader")])
def test_a_node_that_answers_or_times_out_while_the_others_refuse_is_waited_for(
    clock: FakeTime, the_rest: Answer
) -> None:
    # An election: a node still runs, so the whole failover budget is spent on it.
    def answer(call: HttpCall) -> HttpReply | SendFailure:
        return the_rest(call) if call.base_url == C else _nothing_listens(call)

    store, transport = _store(
        answer, "rqlite://a:4001,b:4001,c:4001?retries=3", clock=clock.monotonic
    )
    with pytest.raises(errors.StoreUnavailable, match="accepted no write after"):
        store.execute([INSERT])
    assert len(transport.posts()) >= 4
    assert clock.now == pytest.approx(failover_budget(3))


# -- no leader: stale reads, when asked for ---------------------------------------------------


def _leaderless(call: HttpCall) -> HttpReply | SendFailure:
    if call.base_url != C:
        return _refused(call)  # two of three nodes down
    if call.path == "/nodes":
        return _json(200, _members(None))
    if call.params.get("level") == "none":
        return _json(200, ROWS)
    return _text(503, "leader not found")


def test_without_a_leader_a_read_is_unavailable_unless_stale_reads_are_asked_for(
    clock: FakeTime,
) -> None:
    url = "rqlite://a:4001,b:4001,c:4001?retries=2"
    store, _ = _store(_leaderless, url, clock=clock.monotonic)
    with pytest.raises(errors.StoreUnavailable, match="answered no read"):
        store.query(SELECT)

    told: list[str] = []
    stale, transport = _store(_leaderless, url, on_stale_read=told.append, clock=clock.monotonic)
    assert stale.query(SELECT) == [{"n": 1}]
    assert told == [C]
    asked = len(transport.posts())
    # Stale once, stale for the rest of the command: no second wait for a leader.
    assert stale.query(SELECT) == [{"n": 1}]
    assert transport.posts()[asked:] == [(C, "none")]
    assert told == [C]


def test_a_cluster_that_never_answered_gets_no_stale_read(clock: FakeTime) -> None:
    told: list[str] = []
    store, transport = _store(
        _refused, "rqlite://a:4001?retries=1", on_stale_read=told.append, clock=clock.monotonic
    )
    with pytest.raises(errors.StoreUnavailable):
        store.query(SELECT)
    assert told == []
    assert all(level != "none" for _, level in transport.posts())


# -- describing the nodes ---------------------------------------------------------------------


def test_a_dead_node_is_shown_with_the_address_it_was_named_by() -> None:
    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.base_url == C:
            return _refused(call)
        if call.path == "/nodes":
            members = _members(A)
            dead = members["nodes"][2]  # type: ignore[index]
            del dead["api_addr"]
            dead.update(reachable=False, error="dial tcp c:4002: connect: connection refused")
            return _json(200, members)
        return _json(200, {"store": {"raft": {"state": "Leader"}}, "build": {"version": "v10"}})

    store, transport = _store(answer)
    nodes = store.nodes()
    dead = nodes[2]
    assert dead.id == "node-c"
    assert dead.address == C
    assert not dead.reachable
    assert "not an http(s) base URL" not in dead.error
    assert "Connection refused" in dead.error
    assert all(call.base_url for call in transport.seen)


def test_known_addresses_go_to_the_members_rqlite_could_not_reach() -> None:
    def member(node_id: str, raft: str, address: str = "") -> NodeInfo:
        return NodeInfo(id=node_id, address=address, reachable=address != "", leader=False,
                        raft_address=raft)  # fmt: skip

    alive = member("n1", "h1:4002", "http://h1:4001")
    # By the host of the raft address, when it is the only spare one there.
    by_host = with_known_addresses(
        [alive, member("n2", "h2:4002"), member("n3", "h3:4002")],
        ["http://h1:4001", "http://h3:4001", "http://h2:4001"],
    )
    assert [node.address for node in by_host] == [
        "http://h1:4001",
        "http://h2:4001",
        "http://h3:4001",
    ]
    # The only spare address for the only member without one.
    alone = with_known_addresses(
        [alive, member("n2", "10.0.0.2:4002")], ["http://h1:4001", "http://x:4001"]
    )
    assert alone[1].address == "http://x:4001"
    # Two members on one host, two spare addresses there: no guess.
    same = with_known_addresses(
        [alive, member("n2", "h1:4004"), member("n3", "h1:4006")],
        ["http://h1:4001", "http://h1:4003", "http://h1:4005"],
    )
    assert [node.address for node in same[1:]] == ["", ""]


def test_messages_name_the_cluster_without_password_or_options(clock: FakeTime) -> None:
    url = "rqlite://bob:secret@a:4001?retries=1&timeout=3"
    store, _ = _store(_refused, url, display_url=url, clock=clock.monotonic)
    assert store.url == "rqlite://bob:***@a:4001"
    with pytest.raises(errors.StoreUnavailable) as failed:
        store.execute([INSERT])
    assert "rqlite://bob:***@a:4001 accepted no write" in str(failed.value)
    assert "secret" not in str(failed.value)
