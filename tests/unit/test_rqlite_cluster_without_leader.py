"""``taskq cluster``'s nodes when the cluster has no leader: the members' ids, short reasons.

A node that answers lists the members, the dead ones by their Raft address
only (rqlite cannot ask a dead node for its API address). The cluster is
scripted; a real one is in tests/acceptance/test_cli_no_quorum.py.
"""

from __future__ import annotations

import pytest

from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure
from taskq.broker.stores.store import NodeInfo
from taskq.cli import cluster as cluster_command
from tests.support.scripted_rqlite import json_reply, nothing_listens, scripted_store

SURVIVOR = "http://127.0.0.1:24005"


def _answer(raft_ports: dict[str, int]) -> object:
    """node1 and node2 down; node3 at :24005 answers as a candidate, listing all three."""

    def answer(call: HttpCall) -> HttpReply | SendFailure:
        if call.base_url != SURVIVOR:
            return nothing_listens(call)
        if call.path == "/status":
            state = {"raft": {"state": "Candidate"}, "node_id": "node3"}
            return json_reply(200, {"store": state, "build": {"version": "v10"}})
        listed: list[dict[str, object]] = []
        for node_id, port in raft_ports.items():
            entry: dict[str, object] = {"id": node_id, "addr": f"127.0.0.1:{port}", "voter": True}
            if node_id == "node3":
                entry.update(api_addr=SURVIVOR, reachable=True, leader=False)
            else:
                error = f"dial tcp 127.0.0.1:{port}: connect: connection refused"
                entry.update(reachable=False, leader=False, error=error)
            listed.append(entry)
        return json_reply(200, {"nodes": listed})

    return answer


LOOPBACK = "rqlite://127.0.0.1:24001,127.0.0.1:24003,127.0.0.1:24005"
STRIDE = {"node1": 24002, "node2": 24004, "node3": 24006}


def _described(url: str, raft_ports: dict[str, int]) -> dict[str, NodeInfo]:
    store, _ = scripted_store(_answer(raft_ports), url)  # type: ignore[arg-type]
    return {node.address or node.id: node for node in store.nodes()}


def test_the_dead_members_are_named_by_their_ids() -> None:
    # Laid out as taskq dev cluster lays nodes out: each Raft port next to its HTTP port.
    nodes = _described(LOOPBACK, STRIDE)
    assert {address: node.id for address, node in nodes.items()} == {
        "http://127.0.0.1:24001": "node1",
        "http://127.0.0.1:24003": "node2",
        SURVIVOR: "node3",
    }
    assert nodes[SURVIVOR].reachable
    assert nodes[SURVIVOR].raft_state == "Candidate"
    assert not nodes["http://127.0.0.1:24001"].reachable

    # A store URL naming the survivor alone: the members are listed by their ids.
    alone = _described("rqlite://127.0.0.1:24005", STRIDE)
    assert sorted(alone) == [SURVIVOR, "node1", "node2"]
    assert not alone["node1"].reachable

    # No layout to read (ports anywhere): the addresses, each for itself, as before.
    scattered = _described(LOOPBACK, {"node1": 31011, "node2": 17502, "node3": 29999})
    assert {address: node.id for address, node in scattered.items()} == {
        "http://127.0.0.1:24001": "?",
        "http://127.0.0.1:24003": "?",
        SURVIVOR: "node3",
    }


def test_the_table_gives_a_short_reason(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = list(_described(LOOPBACK, STRIDE).values())
    cluster_command._print_nodes(nodes)
    table = capsys.readouterr().out
    assert "node1  http://127.0.0.1:24001  voter  no (connection refused)" in table
    assert "Errno" not in table
    assert "ConnectionRefusedError" not in table
