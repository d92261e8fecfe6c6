"""The check of a workflow's shape: its dependencies could all be met, before anything is written.

Each job's parents are checked as a single job's ``after`` is
(:func:`taskq.broker.job_validation.check_parents`); then the positions
named must be jobs of the submission, and no job may be among its own
ancestors, which Kahn's walk over the positions finds in one pass however
wide the fan-out. Both the broker (``ops.workflows``) and ``POST /workflows``
(before it builds the flow) call it.
"""

from __future__ import annotations

from collections.abc import Sequence

from taskq import errors
from taskq.broker.job_validation import PARENT_POSITION, check_parents


def check_workflow_shape(
    count: int, parents: Sequence[Sequence[int]], stored: Sequence[Sequence[int]]
) -> None:
    """Refuse a workflow of ``count`` jobs whose dependencies could never all be met.

    ``parents[i]``: the positions in the submission of job i's parents;
    ``stored[i]``: the ids of its stored parents (its ``after``). Refused with
    InvalidJob(field="after"): a position out of range, a parent named twice
    by one job, a cycle (a job among its own ancestors, itself included).
    """
    if len(parents) > count:
        raise errors.InvalidJob(
            f"parents lists {len(parents)} jobs' parents for {count} jobs", field="after"
        )
    for child, positions in enumerate(parents):
        if positions == ():
            continue  # most jobs of a wide fan-out: nothing to check, 10,000 times over
        check_parents(positions, f"the parents of job {child}")
        for position in positions:
            if not (PARENT_POSITION.admits(position) and position < count):
                raise errors.InvalidJob(
                    f"job {child} names parent position {position}, out of the range 0 to "
                    f"{count - 1} of the jobs submitted",
                    field="after",
                )
    for child, ids in enumerate(stored):
        if ids != ():
            check_parents(ids, f"the stored parents of job {child}")
    _refuse_cycles(count, parents)


def _refuse_cycles(count: int, parents: Sequence[Sequence[int]]) -> None:
    """Kahn's walk: jobs whose parents all come first; any job left over is on a cycle."""
    waiting_on = [0] * count
    children: list[list[int]] = [[] for _ in range(count)]
    for child, positions in enumerate(parents):
        waiting_on[child] = len(positions)
        for position in positions:
            children[position].append(child)
    ready = [job for job in range(count) if not waiting_on[job]]
    placed = 0
    while ready:
        job = ready.pop()
        placed += 1
        for child in children[job]:
            waiting_on[child] -= 1
            if not waiting_on[child]:
                ready.append(child)
    if placed < count:
        on_cycle = min(job for job in range(count) if waiting_on[job])
        raise errors.InvalidJob(
            f"the parents form a cycle (job {on_cycle} is on one, or after one): "
            "no job of it could ever run",
            field="after",
        )
