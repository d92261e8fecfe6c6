"""Jobs that run after other jobs: the statements every write about them ends with.

A job with parents is ``waiting`` until each has ended. The counters that
say so are kept by triggers as parents change state (see
``sql/queries/dependencies.sql``); a write that ends, reopens or adds such
jobs appends :func:`settle_statements`, which cancels the jobs a failed
parent dooms and queues the ones whose parents have all ended, in the same
transaction. Enqueue, reports, cancel, retry, the lease requeuer and
workflows all build their writes from these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from taskq import errors, fast_json
from taskq.broker.ops import queries
from taskq.broker.ops.common import ids_param
from taskq.broker.ops.plan import Op, Read
from taskq.broker.stores.store import Consistency, Statement

Edge = tuple[str, int, str | None, int | None]
"""[child key, position, parent key (a parent new in the same write) or None, parent id or None]."""

PositionalEdges = tuple[int, int, list[int]]
"""A job of a workflow's request and its parents: [its position in the request, how many of
its parents are stored, its parents in declared order: the stored ones' ids, then the others'
positions in the request] (see ``job_parents_insert_positional``)."""


def settle_statements(*, cascade: bool = True) -> list[Statement]:
    """The end of every write that can end, reopen or add a job with parents.

    First the cascade (waiting jobs a failed parent dooms, and theirs, end
    cancelled), then the release (waiting jobs whose parents all ended are
    queued), which sees what the cascade ended. Each reads a partial index
    that is empty between writes, so a write with nothing to settle pays two
    probes.

    ``cascade=False`` leaves the cascade out, for a write whose only ends are
    successes: it dooms no job. The release is what such a write returns, and
    is always last. rqlite prepares every statement anew on each node, so the
    statement left out saves a report write about half a millisecond there.
    """
    release = Statement(queries.query("job_release_ready"))
    if not cascade:
        return [release]
    return [Statement(queries.query("job_cascade_cancel")), release]


def written_statements(
    edges: Sequence[Edge], child_keys: Sequence[str], stored_parents: Sequence[int]
) -> list[Statement]:
    """What follows the INSERT of jobs with parents: their edges, counters, and the settling.

    ``edges`` are the new jobs' dependencies, ``child_keys`` the keys of the
    jobs among them that have parents, ``stored_parents`` the stored jobs they
    name. An edge whose parent is not found fails the write. The stored
    parents are flagged as having children (the counting triggers fire only
    for those; a parent new in the write was flagged by its INSERT), and the
    children counted from their parents' states as they are: a parent may
    have ended already.
    """
    keys = {"keys": fast_json.dumps_text(list(child_keys))}
    recount = queries.query("job_parents_recount").format(
        chosen=queries.query("job_parents_recount_by_key")
    )
    return [
        Statement(
            queries.query("job_parents_insert"), {"edges": fast_json.dumps_text(list(edges))}
        ),
        Statement(queries.query("job_parents_flag"), {"ids": ids_param(stored_parents)}),
        Statement(recount, keys),
        *settle_statements(),
    ]


def positional_statements(
    key_prefix: str, edges: Sequence[PositionalEdges], stored_parents: Sequence[int]
) -> list[Statement]:
    """:func:`written_statements` for a workflow's jobs, which are keyed by position.

    Their keys are ``key_prefix``, a slash and their positions in the request
    (``ops.enqueue.PositionalKeys``). The INSERT sets a waiting job's count of
    parents left to its count of parents: only a job with stored parents
    (one of them may have ended) is counted again, and stored parents are
    flagged only when there are some.
    """
    statements = [
        Statement(
            queries.query("job_parents_insert_positional"),
            {"key_prefix": key_prefix, "edges": fast_json.dumps_text(list(edges))},
        )
    ]
    if stored_parents:
        recount = queries.query("job_parents_recount").format(
            chosen=queries.query("job_parents_recount_by_position")
        )
        recounted = [position for position, stored, _ in edges if stored > 0]
        statements += [
            Statement(queries.query("job_parents_flag"), {"ids": ids_param(stored_parents)}),
            Statement(
                recount,
                {"key_prefix": key_prefix, "positions": fast_json.dumps_text(recounted)},
            ),
        ]
    return [*statements, *settle_statements()]


def revive_statements(retried: Sequence[int]) -> list[Statement]:
    """After a retry of ``retried``: the jobs their ends cancelled wait again, counted anew.

    Two statements, because one would count parents whose own revival it has
    not yet written. The jobs retried that have parents are counted too.
    """
    ids = {"ids": ids_param(retried)}
    recount = queries.query("job_parents_recount").format(
        chosen=queries.query("job_parents_recount_revived")
    )
    return [Statement(queries.query("job_revive"), ids), Statement(recount, ids)]


def parent_workflows(parent_ids: Iterable[int]) -> Op[dict[int, int | None]]:
    """The workflow (None: none) of each stored parent; refuse one that is not stored.

    Raises InvalidJob(field="after") naming the ids no job has (never
    submitted, or pruned since).
    """
    wanted = sorted(set(parent_ids))
    if not wanted:
        return {}
    rows = yield Read(
        Statement(queries.query("job_parent_workflows"), {"ids": ids_param(wanted)}),
        Consistency.LINEARIZABLE,
    )
    found: dict[int, int | None] = {
        int(row["id"]): None if row["workflow_id"] is None else int(row["workflow_id"])
        for row in rows
    }
    missing = [parent for parent in wanted if parent not in found]
    if missing:
        raise errors.InvalidJob(
            f"no job has the id(s) {missing} given as parents: never submitted, or pruned",
            field="after",
        )
    return found


def spec_fields(
    *, parent_count: int, run_anyway: bool, workflow_id: int | None, has_children: bool = False
) -> dict[str, Any]:
    """What a job row adds to ``ops.enqueue.checked_row``'s fields to be written into a workflow.

    ``has_children``: a job written in the same request names it as a parent.
    Left out, a field takes its default (queued, no workflow, no parents, no
    children), which keeps the rows of jobs without parents short.
    """
    fields: dict[str, Any] = {"has_children": 1} if has_children else {}
    if parent_count:
        fields |= {"state": "waiting", "parent_count": parent_count}
        if run_anyway:
            fields["run_anyway"] = 1
    if workflow_id is not None:
        fields["workflow_id"] = workflow_id
    return fields
