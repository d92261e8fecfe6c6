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
from typing import NamedTuple

from taskq.broker.records import JobEdge

_BRANCH, _LAST_BRANCH = "├─ ", "└─ "
_THROUGH, _PAST = "│  ", "   "
_SPAWNED = "spawned "


class Tree(NamedTuple):
    """A drawing's lines, and the jobs it left out (see :func:`drawn`'s ``most_siblings``)."""

    lines: list[str]
    left_out: set[int]


def drawn(
    job_ids: Iterable[int],
    edges: Sequence[JobEdge],
    line: Callable[[int], str],
    *,
    most_siblings: int | None = None,
    more: Callable[[Sequence[int]], str] = lambda hidden: f"... {len(hidden)} more",
) -> Tree:
    """The tree's lines: each job as ``line(job_id)`` with the branches that lead to it.

    The roots are the jobs no edge leads to; a job an edge names that is not
    among ``job_ids`` (pruned since) is drawn too, so nothing hangs loose.

    ``most_siblings``: of more siblings than that (a job's children, or the
    roots), the first ``most_siblings`` are drawn and the rest stand as one
    line, ``more(their ids)``: a fan-out over ten thousand files is read in a
    screen, not in twenty thousand lines. What only they lead to is left out
    too; ``left_out`` names every job not drawn.
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
    shown: set[int] = set()
    lines: list[str] = []
    # Depth first without recursion: a chain of ten thousand steps is a workflow too.
    # Each entry: the job (or the siblings left out, as a tuple), what goes before its
    # own line, what goes before its children's.
    stack: list[tuple[int | tuple[int, ...], str, str]] = []

    def push(siblings: list[int], below: str, *, roots: bool = False) -> None:
        entries: list[int | tuple[int, ...]] = list(siblings)
        if most_siblings is not None and len(siblings) > most_siblings:
            entries = [*siblings[:most_siblings], tuple(siblings[most_siblings:])]
        for index in reversed(range(len(entries))):
            last = index == len(entries) - 1
            if roots:
                stack.append((entries[index], "", ""))
                continue
            branch, through = (_LAST_BRANCH, _PAST) if last else (_BRANCH, _THROUGH)
            stack.append((entries[index], below + branch, below + through))

    push(sorted(everyone - has_parent), "", roots=True)
    while stack:
        entry, lead, below = stack.pop()
        if isinstance(entry, tuple):
            lines.append(lead + more(entry))
            continue
        if entry in shown:
            lines.append(f"{lead}{entry} (see above)")
            continue
        shown.add(entry)
        lines.append(lead + (_SPAWNED if entry in spawned else "") + line(entry))
        push(sorted(children.get(entry, ())), below)
    return Tree(lines, everyone - shown)
