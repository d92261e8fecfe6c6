"""A job's parents, children, spawner and spawned jobs, for ``status`` and ``retry``.

The store reads them in one request (``Client.relatives``). A taskq serve
has no endpoint for that read, but its workflows' have the edges and states
they are made of: over HTTP a workflow's job gets its relatives from them,
and a job outside a workflow shows none (its parents' count is on the job).
"""

from __future__ import annotations

from taskq import errors
from taskq.broker.client.client import Client
from taskq.broker.records import Job, JobState, Relatives


def relatives_of(client: Client, job: Job, *, limit: int) -> Relatives:
    """``job``'s relatives, at most ``limit`` on each side, as :meth:`Client.relatives`
    tells them; over HTTP, from the job's workflow (see the module's docstring)."""
    try:
        return client.relatives(job.id, limit=limit)
    except errors.NotOverHttp:
        pass
    if job.workflow_id is None:
        return Relatives(parents=(), children=())
    # Edges before states: a spawn writes its jobs and their edges in one write, so every
    # job an edge names is among the jobs read after it (unless pruned since).
    edges = client.workflow_edges(job.workflow_id)
    states = {brief.id: brief.state for brief in client.workflow_jobs(job.workflow_id)}
    # The edges come by child, then by the parent's declared position.
    parents = [edge.parent_id for edge in edges if edge.child_id == job.id and not edge.spawned]
    children = sorted(
        edge.child_id for edge in edges if edge.parent_id == job.id and not edge.spawned
    )
    spawners = [
        edge.parent_id
        for edge in edges
        if edge.child_id == job.id and edge.spawned and edge.parent_id not in parents
    ]
    spawned = sorted(
        edge.child_id
        for edge in edges
        if edge.parent_id == job.id and edge.spawned and edge.child_id not in children
    )

    def known(ids: list[int]) -> tuple[tuple[int, JobState], ...]:
        return tuple((job_id, states[job_id]) for job_id in ids if job_id in states)[:limit]

    spawned_by = known(spawners[:1])
    return Relatives(
        parents=known(parents),
        children=known(children),
        spawned_by=spawned_by[0] if spawned_by else None,
        spawned=known(spawned),
    )
