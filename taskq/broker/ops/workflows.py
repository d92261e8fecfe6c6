"""Workflows: jobs that run after other jobs, submitted whole, released by their parents' ends.

A job with parents is ``waiting`` until every parent has ended; the write
that ends its last parent also makes it ``queued`` (see
``sql/queries/dependencies.sql``): no scan, no maintenance tick, exactly once.
A parent that ends failed, dead or cancelled cancels its waiting children
at once, and theirs, unless a child runs anyway. Retrying that parent
revives them; cancelling a job cancels the jobs waiting on it.

A job's parents are numbered (its positions, from 0) in the order declared:
its stored parents (its ``after``) first, then its parents in the
submission (``WorkflowSubmission.parents``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from taskq import errors, fast_json
from taskq.broker import job_validation, workflow_shape
from taskq.broker.ops import dependencies, queries
from taskq.broker.ops.common import KEYSET_START
from taskq.broker.ops.enqueue import (
    MAX_PAYLOAD_BYTES,
    PositionalKeys,
    auto_key,
    checked_row,
    job_insert_sql,
    jobs_write,
)
from taskq.broker.ops.jobs import cancel_chosen, job_retry_reviving
from taskq.broker.ops.plan import Op, Read
from taskq.broker.records import (
    JOB_STATES,
    JobBrief,
    JobEdge,
    JobState,
    SubmittedWorkflow,
    WorkflowInfo,
    WorkflowStatus,
    WorkflowSubmission,
)
from taskq.broker.stores.store import Consistency, Row, SqlValue, Statement


class WorkflowRows:
    """A submission's jobs as rows for ``ops.enqueue``'s INSERT, and their dependencies.

    Each job's key is the workflow's key, a slash and its position
    (:class:`taskq.broker.ops.enqueue.PositionalKeys`, which the INSERT
    computes): a resend of the same request finds every job it wrote.
    """

    def __init__(
        self,
        submission: WorkflowSubmission,
        *,
        key: str,
        workflow_id: int | None,
        max_payload_bytes: int,
    ) -> None:
        specs = submission.jobs
        if not specs:
            raise errors.InvalidJob("a workflow needs at least one job", field="jobs")
        workflow_shape.check_workflow_shape(
            len(specs), submission.parents, [spec.after for spec in specs]
        )
        internal = submission.parents
        has_children = {position for positions in internal for position in positions}
        self.keys = PositionalKeys(key)
        self.rows: list[dict[str, Any]] = []
        self.edges: list[dependencies.PositionalEdges] = []
        for index, spec in enumerate(specs):
            if spec.idempotency_key is not None:
                raise errors.InvalidJob(
                    f"job {index} of a workflow brings its own idempotency key; the "
                    "workflow's key names all its jobs",
                    field="idempotency_key",
                )
            row = checked_row(spec, max_payload_bytes=max_payload_bytes, identity=False)
            named = internal[index] if index < len(internal) else ()
            row |= dependencies.spec_fields(
                parent_count=len(spec.after) + len(named),
                run_anyway=spec.run_anyway,
                workflow_id=workflow_id,
                has_children=index in has_children,
            )
            self.rows.append(row)
            if spec.after or named:
                self.edges.append((index, len(spec.after), [*spec.after, *named]))
        self.stored_parents = sorted({parent for spec in specs for parent in spec.after})

    def stand_for(self, fingerprint: str) -> None:
        """Give every job the workflow's fingerprint: a resend of another request under
        the same key then conflicts on its jobs' keys too, as on the workflow's."""
        self.keys = PositionalKeys(self.keys.prefix, fingerprint)

    def dependency_statements(self) -> list[Statement]:
        """The edges, the new children's counters, and the settling of what that decides."""
        if not self.edges:
            return []
        return dependencies.positional_statements(self.keys.prefix, self.edges, self.stored_parents)


def _refuse_foreign(parents: dict[int, int | None], workflow_id: int | None, what: str) -> None:
    foreign = sorted(parent for parent, joined in parents.items() if joined != workflow_id)
    if foreign:
        raise errors.InvalidJob(
            f"the stored parent(s) {foreign} are not in {what}: a job's stored parents "
            "must belong to the workflow it joins",
            field="after",
        )


def workflow_submit(
    submission: WorkflowSubmission,
    *,
    now: float | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Op[SubmittedWorkflow]:
    """Write a whole workflow in one request: every job and every dependency, or nothing.

    Refused with :class:`taskq.errors.InvalidJob` (``field="after"``), nothing
    written: a cycle, a parent position out of range, a parent named twice,
    a stored parent that does not exist (never submitted, or pruned), or one
    outside the workflow extended. The same ``idempotency_key`` with the same
    request returns the same ids; with another, IdempotencyConflict.
    """
    given = submission.idempotency_key
    if given is not None:
        job_validation.check_name(given, "idempotency_key")
    job_validation.check_name(submission.name, "name", empty_allowed=True)
    job_validation.check_name(submission.submitter, "submitter", empty_allowed=True)
    key = auto_key() if given is None else given
    workflow_id = submission.workflow_id
    rows = WorkflowRows(
        submission, key=key, workflow_id=workflow_id, max_payload_bytes=max_payload_bytes
    )
    fingerprint = None
    if given is not None:
        # Only a caller's key can come back with another request (see checked_row).
        fingerprint = job_validation.workflow_fingerprint(submission)
        rows.stand_for(fingerprint)
    before: list[Statement] = []
    if workflow_id is None:
        if rows.stored_parents:
            raise errors.InvalidJob(
                f"a new workflow's jobs wait only on each other, not on stored jobs "
                f"{rows.stored_parents} (a step's after=): submit the workflow once those have "
                "ended, or the step that waits for them on its own, with after=",
                field="after",
            )
        workflow_key: str | None = key
        before.append(
            Statement(
                queries.query("workflow_insert"),
                {
                    "name": submission.name,
                    "key": key,
                    "fingerprint": fingerprint,
                    "submitter": submission.submitter,
                },
            )
        )
    else:
        yield from workflow_get(workflow_id)  # WorkflowNotFound
        parents = yield from dependencies.parent_workflows(rows.stored_parents)
        _refuse_foreign(parents, workflow_id, f"workflow {workflow_id}")
        workflow_key = None
    try:
        job_ids, answers = yield from jobs_write(
            rows.rows,
            now=now,
            before=before,
            after=rows.dependency_statements(),
            workflow_key=workflow_key,
            positional=rows.keys,
        )
    except errors.ConstraintViolation as exc:
        if exc.index <= len(before):
            raise (yield from _key_conflict(key)) from exc
        # A stored parent pruned since it was read: the read says so.
        yield from dependencies.parent_workflows(rows.stored_parents)
        raise
    if workflow_id is None:
        # A new workflow's INSERT returned its id; a resent one's is read.
        returned = answers[1].rows
        workflow_id = int(returned[0]["id"]) if returned else (yield from _workflow_id_of(key))
    return SubmittedWorkflow(id=workflow_id, job_ids=tuple(job_ids))


def _workflow_id_of(key: str) -> Op[int]:
    rows = yield Read(
        Statement(queries.query("workflow_by_key"), {"key": key}), Consistency.LINEARIZABLE
    )
    return int(rows[0]["id"])


def _key_conflict(key: str) -> Op[errors.IdempotencyConflict]:
    rows = yield Read(
        Statement(queries.query("workflow_by_key"), {"key": key}), Consistency.LINEARIZABLE
    )
    workflow_id = int(rows[0]["id"]) if rows else 0
    first_job = rows[0]["first_job"] if rows else None
    return errors.IdempotencyConflict(
        f"idempotency key {key!r} already names workflow {workflow_id}, submitted with a "
        "different request (jobs, parents or name); nothing was written",
        job_id=0 if first_job is None else int(first_job),
    )


def spawn_statements(
    job_id: int,
    lease_token: str,
    submission: WorkflowSubmission,
    *,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Op[list[Statement]]:
    """The statements that write a running job's fan-out, fenced by its lease.

    For the report that completes job ``job_id`` under ``lease_token``, to
    go before it in its write: the jobs of ``submission`` join the job's
    workflow (a new one, which the job joins, if it is in none); their stored
    parents (``after``) must belong to it. Those that name no submitter, and a
    new workflow, are the job's submitter's. A report refused (the lease moved
    on) writes none of them. Refused with InvalidJob before anything is
    written, as :func:`workflow_submit` refuses.
    """
    stored = sorted({parent for spec in submission.jobs for parent in spec.after})
    workflows = yield from dependencies.parent_workflows([job_id, *stored])
    workflow_id = workflows.pop(job_id)
    if job_id in stored:
        workflows[job_id] = workflow_id
    key = f"spawn:{lease_token}"
    rows = WorkflowRows(
        submission, key=key, workflow_id=workflow_id, max_payload_bytes=max_payload_bytes
    )
    where = f"job {job_id}'s workflow" if workflow_id is not None else f"job {job_id}'s new one"
    _refuse_foreign(workflows, workflow_id, where)
    fence: dict[str, SqlValue] = {"job_id": job_id, "lease_token": lease_token}
    statements = []
    if workflow_id is None:
        named = {**fence, "key": key}
        statements += [
            Statement(
                queries.query("workflow_spawn_create"),
                {**named, "name": submission.name, "submitter": submission.submitter},
            ),
            Statement(queries.query("workflow_spawn_join"), named),
        ]
    statements.append(
        Statement(
            job_insert_sql("workflow_spawn_specs", in_workflow=True, positional=True),
            {
                **fence,
                "specs": fast_json.dumps_text(rows.rows),
                "workflow_key": key,
                **rows.keys.params(),
            },
        )
    )
    statements.append(
        Statement(queries.query("workflow_spawn_submitter"), {"job_id": job_id, "key": key})
    )
    return [*statements, *rows.dependency_statements()]


def spawn_check(job_id: int, lease_token: str, submission: WorkflowSubmission) -> Op[None]:
    """Refuse ``submission`` as :func:`spawn_statements` would (InvalidJob), writing nothing.

    Asked by the worker before it reports the job that spawned it: a refusal
    then fails that job's attempt, not the write that carries other jobs' reports.
    """
    yield from spawn_statements(job_id, lease_token, submission)


def spawn_refusal(exc: errors.InvalidJob) -> str:
    """The error of an attempt whose spawn was refused: it failed for good, spawning nothing."""
    return f"its spawn was refused, nothing was spawned: {exc}"


def workflow_get(workflow_id: int) -> Op[WorkflowInfo]:
    """The workflow and its jobs' counts per state; :class:`taskq.errors.WorkflowNotFound`."""
    rows = yield Read(
        Statement(queries.query("workflow_get"), {"workflow_id": int(workflow_id)}),
        Consistency.WEAK,
    )
    if not rows:
        raise errors.WorkflowNotFound(f"no workflow with id {workflow_id}")
    return _workflow_info(rows)


def workflow_list(
    *,
    name: str | None = None,
    submitter: str | None = None,
    status: WorkflowStatus | str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> Op[list[WorkflowInfo]]:
    """Workflows newest first, each with its jobs' counts per state; pass the last id seen
    as ``before`` for the next page of ``limit`` (1 to 1000). ``name``, ``submitter`` and
    ``status`` keep the workflows of that name, of that submitter and in that status
    (a :class:`taskq.WorkflowStatus` or its name).

    A status is known only once a workflow's jobs are counted, so with one the
    workflows are read a page at a time, newest first, until the page is full
    or none is left: asking for the few failed among many that succeeded
    reads past the others' jobs. The running ones are found from their jobs
    yet to end instead, unless those are so many that the pass is cheaper.
    """
    job_validation.check_page_limit(limit)
    wanted = int(limit)
    if status is not None:
        status = job_validation.parse_workflow_status(status)
    chunk = wanted if status is None else max(wanted, _STATUS_SCAN_PAGE)
    params: dict[str, SqlValue] = {
        "name": name,
        "submitter": submitter,
        "before": int(before) if before is not None else KEYSET_START,
        "limit": chunk,
    }
    if status is WorkflowStatus.RUNNING:
        counted = yield Read(
            Statement(queries.query("workflow_unfinished_jobs"), {}), Consistency.WEAK
        )
        if int(counted[0]["n"]) <= _UNFINISHED_READ_MOST:
            rows = yield Read(
                Statement(_listing("workflow_list_running_page"), {**params, "limit": wanted}),
                Consistency.WEAK,
            )
            return _workflow_infos(rows)
    found: list[WorkflowInfo] = []
    while True:
        rows = yield Read(Statement(_listing("workflow_list_page"), params), Consistency.WEAK)
        page = _workflow_infos(rows)
        found += [info for info in page if status is None or info.status is status]
        if len(found) >= wanted or len(page) < chunk:
            return found[:wanted]
        params["before"] = page[-1].id


_STATUS_SCAN_PAGE = 200
"""How many workflows a listing by status reads at a time."""

_UNFINISHED_READ_MOST = 100_000
"""Up to how many jobs yet to end a listing of the running workflows reads
them (``workflow_list_running_page``) rather than pass over the workflows. On an
Intel Xeon, 100,000 of them are read in about 15 ms, a pass counts about
100,000 workflow jobs in 47 ms: past this many, a pass may be the cheaper
(docs/performance.md, "Listing workflows by status")."""


@functools.cache
def _listing(page: str) -> str:
    """``workflow_list`` over the page that the query named ``page`` chooses: composed
    once, as ``leases._report_query`` is, not on each poll of a console."""
    return queries.query("workflow_list").format(page=queries.query(page))


def _workflow_infos(rows: Sequence[Row]) -> list[WorkflowInfo]:
    """The workflows of ``workflow_list``'s rows: a row per workflow and state, a
    workflow's rows together, newest workflow first."""
    by_workflow: dict[int, list[Row]] = {}
    for row in rows:
        by_workflow.setdefault(int(row["id"]), []).append(row)
    return [_workflow_info(group) for group in by_workflow.values()]


def _workflow_info(rows: Sequence[Row]) -> WorkflowInfo:
    """One workflow from its rows of ``workflow_get`` or ``workflow_list``: one per state."""
    first = rows[0]
    counts = dict.fromkeys(JobState, 0)
    for row in rows:
        if row["state"] is not None:
            counts[JobState(row["state"])] = int(row["n"])
    return WorkflowInfo(
        id=int(first["id"]),
        name=str(first["name"]),
        submitter=str(first["submitter"]),
        created_at=float(first["created_at"]),
        counts=counts,
        status=WorkflowStatus.of(counts),
    )


def workflow_jobs(workflow_id: int) -> Op[list[JobBrief]]:
    """The workflow's jobs, oldest first, each its id and state;
    :class:`taskq.errors.WorkflowNotFound`."""
    rows = yield Read(
        Statement(queries.query("workflow_jobs"), {"workflow_id": int(workflow_id)}),
        Consistency.WEAK,
    )
    if not rows:
        yield from workflow_get(workflow_id)  # WorkflowNotFound
    return [
        JobBrief(
            id=int(row["id"]), state=JOB_STATES[row["state"]], submitted=bool(row["submitted"])
        )
        for row in rows
    ]


def workflow_edges(workflow_id: int) -> Op[list[JobEdge]]:
    """Every dependency among the workflow's jobs, by child then declared order, each
    spawned job's spawn first (``spawned``); :class:`taskq.errors.WorkflowNotFound`."""
    rows = yield Read(
        Statement(queries.query("workflow_edges"), {"workflow_id": int(workflow_id)}),
        Consistency.WEAK,
    )
    if not rows:
        yield from workflow_get(workflow_id)  # WorkflowNotFound, as over HTTP
    return [
        JobEdge(
            parent_id=int(row["parent_id"]),
            child_id=int(row["child_id"]),
            spawned=bool(row["spawned"]),
        )
        for row in rows
    ]


def workflow_cancel(workflow_id: int, *, now: float | None = None) -> Op[int]:
    """Cancel every unfinished job of the workflow (running ones asked to stop); how many."""
    result = yield from cancel_chosen(
        queries.query("workflow_jobs_chosen"), {"workflow_id": int(workflow_id)}, now
    )
    moved = len(result.cancelled) + len(result.requested)
    if not moved:
        yield from workflow_get(workflow_id)  # WorkflowNotFound
    return moved


def workflow_retry(workflow_id: int, *, now: float | None = None) -> Op[int]:
    """Retry every failed, dead or cancelled job of the workflow; how many were moved.

    Those a parent's end cancelled are not retried themselves: a retry of
    that parent revives them (they wait for it again), and they count as moved.
    """
    rows = yield Read(
        Statement(queries.query("workflow_retryable"), {"workflow_id": int(workflow_id)}),
        Consistency.LINEARIZABLE,
    )
    if not rows:
        yield from workflow_get(workflow_id)  # WorkflowNotFound
        return 0
    retried, revived = yield from job_retry_reviving([int(row["id"]) for row in rows], now=now)
    return len(retried) + len(revived)
