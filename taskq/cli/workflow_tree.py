"""A workflow's jobs drawn as an indented tree from its roots.

A workflow is a DAG, not a tree: a fan-in has many parents. Each job is
drawn in full once, under the first parent that reaches it (parents and
children in id order, so the drawing is the same every time); wherever
else it is reached it stands as a reference, its id and ``(see above)``.
So a diamond reads as two branches meeting, and a fan-in over N jobs costs
N short lines, not N copies of what follows it.

A job spawned by a running job (``current_job().spawn``) that waits for no
parent is drawn under the job that spawned it, its line marked ``spawned``:
otherwise a run-time fan-out would stand beside its spawner as roots of
their own. A spawned job with parents is drawn under them, as any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from taskq.broker.records import JobEdge

_BRANCH, _LAST_BRANCH = "├─ ", "└─ "
_THROUGH, _PAST = "│  ", "   "
SPAWNED = "spawned "


def drawn(
    job_ids: Iterable[int], edges: Sequence[JobEdge], line: Callable[[int], str]
) -> list[str]:
    """The tree's lines: each job as ``line(job_id)`` with the branches that lead to it.

    The roots are the jobs no edge leads to; a job an edge names that is not
    among ``job_ids`` (pruned since) is drawn too, so nothing hangs loose.
    """
    waits = {edge.child_id for edge in edges if not edge.spawned}
    children: dict[int, list[int]] = {}
    has_parent: set[int] = set()
    spawned: set[int] = set()
    for edge in edges:
        if edge.spawned:
            if edge.child_id in waits:
                continue  # drawn under the parents it waits for
            spawned.add(edge.child_id)
        children.setdefault(edge.parent_id, []).append(edge.child_id)
        has_parent.add(edge.child_id)
    everyone = set(job_ids) | set(children) | has_parent
    roots = sorted(everyone - has_parent)
    shown: set[int] = set()
    lines: list[str] = []
    # Depth first without recursion: a chain of ten thousand steps is a workflow too.
    # Each entry: the job, what goes before its own line, what goes before its children's.
    stack = [(root, "", "") for root in reversed(roots)]
    while stack:
        job_id, lead, below = stack.pop()
        if job_id in shown:
            lines.append(f"{lead}{job_id} (see above)")
            continue
        shown.add(job_id)
        lines.append(lead + (SPAWNED if job_id in spawned else "") + line(job_id))
        following = sorted(children.get(job_id, ()))
        for index in reversed(range(len(following))):
            last = index == len(following) - 1
            stack.append(
                (
                    following[index],
                    below + (_LAST_BRANCH if last else _BRANCH),
                    below + (_PAST if last else _THROUGH),
                )
            )
    return lines
