"""The store layer: the narrow ``Store`` interface (``store.py``) and its two stores.

``sqlite_store.py`` (embedded, one file; ``wal_watch.py`` hears its commits)
and ``rqlite_store.py`` (a replicated cluster, spoken to over taskq's own
HTTP/1.1 client: ``http_plan.py``, ``http_wire.py``, ``http_transport.py``;
``rqlite_protocol.py`` reads its answers, ``rqlite_cluster.py`` holds what
it knows of the nodes, ``rqlite_failover.py`` how a request rides out a
lost leader). ``store_url.py`` parses store URLs, ``trampoline.py`` drives
plans sync or async, and ``wake_hints.py`` is a worker's socket for wake-up
hints. Nothing here knows SQL of its own or imports the operations above it.
"""
