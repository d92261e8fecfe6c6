"""A real 3-node cluster with 2 nodes killed: no election can complete, and the store says so.

A read that may be stale goes to the survivor's copy after one look at each
node, not after the failover budget; a write gives up once every node has
been asked again, with an error that says the cluster has no leader and
why. The requests are counted, not timed.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.stores.http_plan import HttpCall, HttpReply, SendFailure
from taskq.broker.stores.http_transport import HttpTransport, TransportOptions
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import Statement
from taskq.broker.stores.store_url import RqliteTarget, parse_store_url
from tests.support.rqlite_cluster import RqliteCluster, RqliteNode, running_cluster

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster


@dataclass
class Counted:
    """A real transport that counts the requests by path."""

    inner: HttpTransport
    paths: Counter[str] = field(default_factory=Counter)

    def send(self, call: HttpCall) -> HttpReply | SendFailure:
        self.paths[call.path] += 1
        return self.inner.send(call)

    async def send_async(self, call: HttpCall) -> HttpReply | SendFailure:
        self.paths[call.path] += 1
        return await self.inner.send_async(call)

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Stranded:
    """A cluster of three whose nodes but ``survivor`` were killed."""

    cluster: RqliteCluster
    survivor: RqliteNode

    def store(self, **kwargs: object) -> tuple[RqliteStore, Counted]:
        target = parse_store_url(self.cluster.url)
        assert isinstance(target, RqliteTarget)
        transport = Counted(HttpTransport(TransportOptions(timeout=5.0, connect_timeout=2.0)))
        store = RqliteStore(target, display_url=self.cluster.url, transport=transport, **kwargs)  # type: ignore[arg-type]
        return store, transport


@pytest.fixture
def stranded(tmp_path: Path) -> Iterator[Stranded]:
    with running_cluster(tmp_path / "cluster") as cluster:
        leader = cluster.wait_for_leader()
        survivor = next(node for node in cluster.nodes if node is not leader)
        for node in (node for node in cluster.nodes if node is not survivor):
            cluster.kill_node(node, signal.SIGKILL)  # by its pid
        # The survivor has noticed: it knows no leader (it stands as a candidate).
        _wait_until(lambda: (cluster.raft_view(survivor) or ("", "?"))[1] == "")
        yield Stranded(cluster, survivor)


def test_a_read_that_may_be_stale_is_answered_after_one_look_at_each_node(
    stranded: Stranded,
) -> None:
    told: list[str] = []
    store, transport = stranded.store(on_stale_read=told.append)
    try:
        assert store.query(Statement("SELECT 1 AS a")) == [{"a": 1}]
    finally:
        store.close()
    assert told == [stranded.survivor.base_url]
    # Who leads asked of each node once, one try, then the survivor's own copy: the
    # failover budget of the default retries would have asked about a hundred times.
    assert transport.paths["/nodes"] == 3, transport.paths
    assert transport.paths["/db/query"] == 2, transport.paths


def test_a_write_says_the_cluster_has_no_leader_and_why(stranded: Stranded) -> None:
    store, transport = stranded.store()
    try:
        with pytest.raises(errors.StoreUnavailable) as failed:
            store.execute([Statement("CREATE TABLE t (a INTEGER)")])
    finally:
        store.close()
    survivor = stranded.survivor.http_addr
    message = str(failed.value)
    assert message.startswith(
        f"rqlite cluster {stranded.cluster.url} has no leader: 1 of 3 nodes answers ({survivor}, "
    ), message
    assert message.endswith(
        "and 2 refuse connections; an election needs a majority: bring a node back"
    ), message
    # Every node asked who leads twice (the second time after a poll), one try.
    assert transport.paths["/nodes"] == 6, transport.paths
    assert transport.paths["/db/execute"] == 1, transport.paths


def _wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
