"""A job's parents, children, spawner and spawned jobs, for ``status``.

One read of the client's, on a store and over a taskq serve alike
(``Client.relatives``, ``GET /jobs/{id}/relatives``).
"""

from __future__ import annotations

from taskq.broker.client.client import Client
from taskq.broker.records import Job, Relatives


def relatives_of(client: Client, job: Job, *, limit: int) -> Relatives:
    """``job``'s relatives, at most ``limit`` on each side: :meth:`Client.relatives`."""
    return client.relatives(job.id, limit=limit)
