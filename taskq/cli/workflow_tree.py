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


class _Row(NamedTuple):
    """One line of a drawing before its text is known: the branches before it, and the job
    (``seen``: drawn above already), or the siblings left out."""

    lead: str
    entry: int | tuple[int, ...]
    seen: bool = False


class Layout(NamedTuple):
    """Where each job of a drawing goes, known before any job is read beyond its id: so
    that only the jobs drawn need reading (:func:`laid_out`)."""

    rows: list[_Row]
    drawn: list[int]
    """The jobs drawn in full, in the drawing's order."""
    left_out: set[int]

    def lines(
        self,
        line: Callable[[int], str],
        more: Callable[[Sequence[int]], str] = lambda hidden: f"... {len(hidden)} more",
    ) -> list[str]:
        """The drawing: each job as ``line(job_id)``, siblings left out as ``more(their ids)``."""
        texts: list[str] = []
        for row in self.rows:
            if isinstance(row.entry, tuple):
                texts.append(row.lead + more(row.entry))
            elif row.seen:
                texts.append(f"{row.lead}{row.entry} (see above)")
            else:
                texts.append(row.lead + line(row.entry))
        return texts


def laid_out(
    job_ids: Iterable[int], edges: Sequence[JobEdge], *, most_siblings: int | None = None
) -> Layout:
    """Where each job goes: the roots are the jobs no edge leads to; a job an edge names
    that is not among ``job_ids`` (pruned since) is drawn too, so nothing hangs loose.

    ``most_siblings``: of more siblings than that (a job's children, or the
    roots), the first ``most_siblings`` are drawn and the rest stand as one
    line: a fan-out over ten thousand files is read in a screen, not in
    twenty thousand lines. What only they lead to is left out too;
    ``left_out`` names every job not drawn.
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
    rows: list[_Row] = []
    drawn_ids: list[int] = []
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
            rows.append(_Row(lead, entry))
            continue
        if entry in shown:
            rows.append(_Row(lead, entry, seen=True))
            continue
        shown.add(entry)
        drawn_ids.append(entry)
        rows.append(_Row(lead + (_SPAWNED if entry in spawned else ""), entry))
        push(sorted(children.get(entry, ())), below)
    return Layout(rows, drawn_ids, everyone - shown)
