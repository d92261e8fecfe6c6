"""Changing a cluster's membership: a member removed by its node id.

Adding a node is rqlite's own business (the new node starts with ``-join``,
see docs/stores.md); removing one is a request to the leader, made here so
that ``taskq cluster remove`` and ``taskq dev cluster`` share it.
"""

from __future__ import annotations

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.stores.rqlite_store import RqliteStore
from taskq.broker.stores.store import NodeInfo
from taskq.broker.stores.store_url import SqliteTarget, mask_password, parse_store_url


def remove_node(url: str, node_id: str) -> list[NodeInfo]:
    """Take the member ``node_id`` out of the cluster at ``url``; the members left.

    Refused, changing nothing, for the embedded store (it has no nodes), a
    node id that is not a member (:class:`taskq.errors.NodeNotFound`), the
    last node, or a cluster without a leader. The node's process is not
    stopped: stop it, and never start it again with its old data.
    """
    if isinstance(parse_store_url(url), SqliteTarget):
        raise errors.ConfigError(
            f"{mask_password(url)} is an embedded SQLite store: it has no nodes to remove"
        )
    store = open_store(url, migrate=False)
    try:
        assert isinstance(store, RqliteStore)
        return store.remove_node(node_id)
    finally:
        store.close()
