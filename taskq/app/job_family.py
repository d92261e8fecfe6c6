"""A job's place in its workflow, as the job view shows it: the workflow, parents, children,
the job that spawned it and the jobs it spawned.

Read with the rest of the job at every poll, so the states beside each
relative are as live as the job's own. Three small reads through the
client: the job's relatives (at most :data:`SHOWN` of each side), and the
workflow's record with its counts per state when the job belongs to one.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskq import errors
from taskq.broker.client.client import AsyncClient
from taskq.broker.records import Job, JobState, WorkflowInfo

# Parents and children listed per side: a fan-in over ten thousand jobs is
# listed in full by the jobs view's workflow filter, not here.
SHOWN = 100


@dataclass(frozen=True, slots=True)
class JobFamily:
    """The workflow a job is in (None: none), and its relatives with their states: parents,
    children, the job that spawned it, the jobs it spawned.

    ``more`` says a side had more than :data:`SHOWN`.
    """

    workflow: WorkflowInfo | None = None
    parents: tuple[tuple[int, JobState], ...] = ()
    children: tuple[tuple[int, JobState], ...] = ()
    spawned_by: tuple[int, JobState] | None = None
    spawned: tuple[tuple[int, JobState], ...] = ()
    more: bool = False

    @property
    def alone(self) -> bool:
        """Whether the job has no workflow and no relatives: nothing to show."""
        return self.workflow is None and not self.relatives

    @property
    def relatives(self) -> list[tuple[str, int, JobState]]:
        """Each relative as (relation, id, state): parents, children, spawner, spawned."""
        spawner = [] if self.spawned_by is None else [("spawner", *self.spawned_by)]
        return [
            *(("parent", *each) for each in self.parents),
            *(("child", *each) for each in self.children),
            *spawner,
            *(("spawned", *each) for each in self.spawned),
        ]


async def family_of(client: AsyncClient, job: Job) -> JobFamily:
    """``job``'s family as the store has it now."""
    relatives = await client.relatives(job.id, limit=SHOWN + 1)
    workflow = None
    if job.workflow_id is not None:
        try:
            workflow = await client.workflow(job.workflow_id)
        except errors.WorkflowNotFound:
            workflow = None  # pruned with its jobs since the job was read
    return JobFamily(
        workflow=workflow,
        parents=relatives.parents[:SHOWN],
        children=relatives.children[:SHOWN],
        spawned_by=relatives.spawned_by,
        spawned=relatives.spawned[:SHOWN],
        more=max(len(relatives.parents), len(relatives.children), len(relatives.spawned)) > SHOWN,
    )
