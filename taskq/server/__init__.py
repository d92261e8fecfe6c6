"""``taskq serve``: the HTTP API and Prometheus metrics over the store, through ``AsyncClient``.

Stateless: every answer comes from the store, so several servers can run
behind a load balancer against one rqlite cluster. Needs the ``server``
extra (``pip install '.[server]'`` in taskq's checkout).
"""
