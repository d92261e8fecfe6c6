"""A client follows the cluster's membership: nodes added, removed and replaced while it runs.

The cluster is scripted: its members, who leads and which nodes listen
change as a test says. The real cluster's changes during a drain are in
tests/integration/test_rqlite_membership.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from taskq import errors
from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure
from taskq.broker.stores.rqlite_cluster import MEMBERSHIP_REFRESH_SECONDS, ClusterView
from taskq.broker.stores.store import NodeInfo, Statement
from tests.support.scripted_rqlite import (
    FakeTime,
    fake_clock,
    json_reply,
    nothing_listens,
    scripted_store,
    text_reply,
)

INSERT = Statement("INSERT INTO t VALUES (1)")
ORIGINAL = "rqlite://n1:4001,n2:4001,n3:4001"


def _url(name: str) -> str:
    return f"http://{name}:4001"


@dataclass
class Cluster:
    """Members by name, the leader, the nodes that listen, and the removals asked for."""

    members: list[str]
    leader: str
    down: set[str] = field(default_factory=set)
    removals: list[tuple[str, object]] = field(default_factory=list)
    # A leader the next answer to /nodes names instead (a node that has not heard yet).
    stale_leader: str | None = None

    def answer(self, call: HttpCall) -> HttpReply | SendFailure:
        name = call.base_url.removeprefix("http://").partition(":")[0]
        if name in self.down or name not in self.members:
            return nothing_listens(call)
        if call.path == "/nodes":
            named, self.stale_leader = self.stale_leader or self.leader, None
            listed = [self.describe(member, named) for member in self.members]
            return json_reply(200, {"nodes": listed})
        if call.path == "/remove":
            self.removals.append((name, call.body))
            if name != self.leader:
                return text_reply(503, "not leader")
            assert isinstance(call.body, dict)
            self.members.remove(str(call.body["id"]))
            if call.body["id"] == self.leader:
                self.leader = ""  # a leader that removed itself: the others elect one
            return text_reply(200)
        # A follower forwards a write to the leader: it goes through either way.
        return json_reply(200, {"results": [{"rows_affected": 1}]})

    def describe(self, member: str, leader: str) -> dict[str, object]:
        reachable = member not in self.down
        return {
            "id": member,
            "api_addr": _url(member) if reachable else "",
            "addr": f"{member}:4002",
            "reachable": reachable,
            "leader": member == leader and reachable,
        }


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    return fake_clock(monkeypatch)


def _writes_to(seen: list[HttpCall]) -> list[str]:
    return [call.base_url for call in seen if call.path == "/db/execute"]


def test_a_client_given_three_nodes_learns_the_added_ones_and_writes_to_a_new_leader(
    clock: FakeTime,
) -> None:
    cluster = Cluster(["n1", "n2", "n3", "n4", "n5"], leader="n4")
    store, transport = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    store.execute([INSERT])
    assert store.cluster.nodes == [_url(name) for name in ("n1", "n2", "n3", "n4", "n5")]
    assert _writes_to(transport.seen) == [_url("n4")]


def test_the_membership_is_asked_again_after_a_while_not_on_every_request(
    clock: FakeTime,
) -> None:
    cluster = Cluster(["n1", "n2", "n3"], leader="n1")
    store, transport = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    for _ in range(5):
        store.execute([INSERT])
    assert [call.path for call in transport.seen].count("/nodes") == 1
    # Nodes 4 and 5 join, node 4 takes the lead: a client that never failed over learns it.
    cluster.members += ["n4", "n5"]
    cluster.leader = "n4"
    clock.now += MEMBERSHIP_REFRESH_SECONDS
    store.execute([INSERT])
    assert [call.path for call in transport.seen].count("/nodes") == 2
    assert _writes_to(transport.seen)[-1] == _url("n4")
    assert _url("n5") in store.cluster.nodes


def test_a_client_keeps_working_once_every_node_of_its_url_is_gone(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3", "n4", "n5"], leader="n1")
    store, transport = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    store.execute([INSERT])
    # The original three are removed and stopped, one by one; node 6 replaces one.
    cluster.members = ["n4", "n5", "n6"]
    cluster.leader = "n5"
    cluster.down = {"n1", "n2", "n3"}
    store.execute([INSERT])
    assert _writes_to(transport.seen)[-1] == _url("n5")
    # The leader it knew of dies in turn: the survivors it learned of name the next.
    cluster.members = ["n5", "n6", "n7"]
    cluster.down |= {"n4"}
    store.execute([INSERT])
    assert _writes_to(transport.seen)[-1] == _url("n5")
    cluster.down |= {"n5"}
    cluster.leader = "n6"
    store.execute([INSERT])
    assert _writes_to(transport.seen)[-1] == _url("n6")


def test_removed_nodes_are_forgotten_but_the_urls_own_are_kept_last(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3", "n4"], leader="n2")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    store.execute([INSERT])
    cluster.members = ["n2", "n3", "n5"]
    clock.now += MEMBERSHIP_REFRESH_SECONDS
    store.execute([INSERT])
    assert store.cluster.nodes == [_url(name) for name in ("n2", "n3", "n5", "n1")]


def test_an_answer_without_a_leader_only_adds_nodes() -> None:
    view = ClusterView.of([_url("n1"), _url("n2")], now=0.0)
    view.learn([NodeInfo(id="n3", address=_url("n3"), reachable=True, leader=False)])
    assert view.nodes == [_url("n1"), _url("n2"), _url("n3")]
    assert view.leader is None


def test_an_unreachable_member_keeps_the_address_the_client_knew() -> None:
    view = ClusterView.of([_url("n1"), _url("n2")], now=0.0)
    view.learn(
        [
            NodeInfo(id="n1", address="", reachable=False, leader=False, raft_address="n1:4002"),
            NodeInfo(id="n2", address=_url("n2"), reachable=True, leader=True),
        ]
    )
    assert view.nodes == [_url("n1"), _url("n2")]
    assert view.leader == _url("n2")


# -- removing a member ----------------------------------------------------------------------


def test_removing_a_member_asks_the_leader_and_returns_who_is_left(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3", "n4"], leader="n2")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    left = store.remove_node("n1")
    assert cluster.removals == [("n2", {"id": "n1"})]
    assert sorted(node.id for node in left) == ["n2", "n3", "n4"]
    assert _url("n4") in store.cluster.nodes


def test_removing_the_leader_returns_who_is_left_while_they_elect_another(
    clock: FakeTime,
) -> None:
    cluster = Cluster(["n1", "n2", "n3"], leader="n1")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    left = store.remove_node("n1")
    assert cluster.removals == [("n1", {"id": "n1"})]
    assert sorted(node.id for node in left) == ["n2", "n3"]


def test_removing_a_node_that_is_not_a_member_changes_nothing(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3"], leader="n1")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    with pytest.raises(errors.NodeNotFound, match="no node 'n9'; its nodes: n1, n2, n3"):
        store.remove_node("n9")
    assert cluster.removals == []


def test_the_last_node_is_never_removed(clock: FakeTime) -> None:
    cluster = Cluster(["n1"], leader="n1")
    store, _ = scripted_store(cluster.answer, "rqlite://n1:4001", clock=clock.monotonic)
    with pytest.raises(errors.MembershipRefused, match="only node"):
        store.remove_node("n1")
    assert cluster.removals == []


def test_a_removal_without_a_leader_is_refused_at_once(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3"], leader="")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    with pytest.raises(errors.StoreUnavailable, match="names a leader"):
        store.remove_node("n3")
    assert cluster.removals == []


def test_a_removal_whose_leader_moved_is_sent_to_the_new_one(clock: FakeTime) -> None:
    cluster = Cluster(["n1", "n2", "n3"], leader="n2", stale_leader="n1")
    store, _ = scripted_store(cluster.answer, ORIGINAL, clock=clock.monotonic)
    store.remove_node("n3")
    assert [node for node, _ in cluster.removals] == ["n1", "n2"]
    assert cluster.members == ["n1", "n2"]
