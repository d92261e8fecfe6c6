"""Wake-up hints on a cluster: a worker records where it listens, a submit gets there."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_set_state
from taskq.broker.stores import wake_hints
from taskq.broker.stores.store import Statement, Store, tells_of_changes
from tests.support.hinted_workers import register_worker
from tests.support.rqlite_cluster import RqliteCluster

pytestmark = pytest.mark.rqlite


@pytest.fixture
def cluster_store(rqlite_cluster: RqliteCluster) -> Iterator[Store]:
    opened = open_store(rqlite_cluster.url)
    yield opened
    opened.close()


def test_a_worker_on_a_cluster_records_where_it_listens(cluster_store: Store) -> None:
    assert isinstance(cluster_store, wake_hints.HintedStore)
    register_worker(
        cluster_store, "w-listening", ["listening-queue"], wake_hints.hint_address(cluster_store)
    )
    try:
        (row,) = cluster_store.query(
            Statement("SELECT wake_address FROM workers WHERE id = 'w-listening'")
        )
        assert row["wake_address"] == cluster_store.listen_for_wakeups()
        host, _, port = row["wake_address"].rpartition(":")
        assert host == "127.0.0.1"  # the cluster is on loopback
        assert int(port) > 0
    finally:
        plan.run(cluster_store, worker_set_state("w-listening", "stopped"))


def test_a_client_submit_on_a_cluster_wakes_the_listening_worker(
    rqlite_cluster: RqliteCluster, cluster_store: Store
) -> None:
    listener = wake_hints.WakeListener("127.0.0.1")
    client = taskq.Client(rqlite_cluster.url)
    register_worker(cluster_store, "w-hinted", ["hinted-queue"], listener.address)

    async def scenario() -> None:
        ended = anyio.Event()

        async def wait() -> None:
            await listener.wait(60.0)
            ended.set()

        with anyio.fail_after(10.0):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                await anyio.to_thread.run_sync(
                    lambda: client.submit("json:dumps", [1], queue="hinted-queue", unchecked=True)
                )
                await ended.wait()

    try:
        anyio.run(scenario, backend_options={"use_uvloop": True})
    finally:
        plan.run(cluster_store, worker_set_state("w-hinted", "stopped"))
        client.close()
        listener.close()


def test_a_cluster_store_does_not_tell_of_changes_even_while_it_listens_for_hints(
    rqlite_cluster: RqliteCluster,
) -> None:
    """Its idle workers keep their busy poll: a hint may be lost, or its look read a stale node."""
    opened = open_store(rqlite_cluster.url)
    try:
        assert wake_hints.hint_address(opened) is not None
        assert not tells_of_changes(opened)
    finally:
        opened.close()
