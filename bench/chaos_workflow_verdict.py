"""The chaos run's verdict on its workflows, from the store's own record after the run.

Run by :mod:`bench.chaos` only. :func:`judge_workflows` reads the rows of
the jobs, executions and job_parents tables (plain dicts, as stored) with
the ledger, and counts, for the jobs of every workflow the run submitted
and the jobs their spawners spawned:

wf_early    a run of a job that began before one of its parents (or, for a
            spawned job, its spawner) had ended
wf_not_run  a child whose parents all succeeded (or all ended, for a
            ``run_anyway`` one) that did not run and succeed: a fan-in never fired
wf_cascade  a child (not ``run_anyway``) of a failed, dead or cancelled parent
            that ran, or did not end cancelled
wf_stuck    a job left waiting, queued or running after the drain
wf_lost     a job missing from the store (a spawned one: not spawned by the
            attempt the store accepted), ended other than its shape says, or
            stored with other parents (or ``run_anyway``) than submitted
wf_spawn    a spawner whose spawned jobs are not one set, spawned by the
            attempt the store accepted: none, or sets from several attempts, or
            from one the store did not accept; a token spawned twice or not of
            its shape; a spawned job whose key names another job's attempt, or
            that is in another workflow than its spawner

Every rule but wf_lost reads only the store's record (the parents from
job_parents, their ends from the jobs and executions tables); the plan of
:mod:`bench.chaos_workflows` is only what wf_lost compares that record with,
and what tells wf_spawn which tokens a spawner spawns.

A spawned job's key is ``spawn:<lease token>/<position>``, the lease token
that of the attempt that spawned it (``workflow_edges`` in
``taskq/broker/ops/sql/queries/workflows.sql`` reads its spawner so): the
verdict finds the spawner as that lease's execution, and the attempt the
store accepted as the spawner's succeeded execution. The spawned jobs are
found by their keys, and told apart by the token their payload carries;
every attempt of a spawner spawns the same tokens, so that a set from an
attempt killed or fenced would show beside the accepted one's.

"Before its parent ended" is checked twice. In the store: each execution's
claim (``claimed_at``; ``started_at`` where that is empty, which holds the
claim until the attempt reports) against the parent's end (the later of the
parent's final execution's ``finished_at`` and its own ``finished_at``).
Both are readings of the store's clock, which ``clock_tick`` never moves
back in commit order (``taskq/broker/ops/sql/queries/common.sql``), and a
child's claim commits after the report that released it, so the claim must
not be earlier; it may be equal, for on rqlite that clock counts in steps of
86 ms (1e-6 day), and a claim in the same step as the report reads the same
time. That blind spot the ledger covers: the start line of every run of the
child (``time.time()``, to the microsecond) must come after the end line of
the parent's run whose outcome the store accepted (named by the attempt id in
its result, or in its error's message for a parent that failed). A parent
that never ran (cancelled) has no such run: the store's check alone holds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.chaos_rows import Row, stored_json

if TYPE_CHECKING:
    from bench.chaos_ledger import Run
    from bench.chaos_workflows import WorkflowJob, WorkflowPlan

TARGETS = ("wf_early", "wf_not_run", "wf_cascade", "wf_stuck", "wf_lost", "wf_spawn")
ROWS = (
    ("wf_early", "workflow runs begun before a parent ended"),
    ("wf_not_run", "children free to run that did not (fan-ins)"),
    ("wf_cascade", "children of a failed parent not cancelled"),
    ("wf_stuck", "workflow jobs left waiting, queued or running"),
    ("wf_lost", "workflow jobs lost, or not as their shape says"),
    ("wf_spawn", "spawners not spawning once, by the accepted attempt"),
)
_ACTIVE = ("waiting", "queued", "running")
_ENDED = ("succeeded", "failed", "dead", "cancelled")
_ATTEMPT = re.compile(r"attempt ([0-9a-f]{16})")
_SPAWN_KEY = "spawn:"


def _time(value: Any) -> float | None:
    return None if value is None else float(value)


def _least(known: float | None, value: float) -> float:
    return value if known is None else min(known, value)


def _spawning_lease(row: Row) -> str | None:
    """The lease token of the attempt that spawned the job (None: it was not spawned)."""
    key = str(row["idempotency_key"])
    if not key.startswith(_SPAWN_KEY) or "/" not in key:
        return None
    return key.removeprefix(_SPAWN_KEY).rpartition("/")[0]


def _token(row: Row) -> str:
    """The token a chaos job was given: its call's first argument."""
    payload = stored_json(row["payload"])
    args = payload.get("args") if isinstance(payload, dict) else None
    return str(args[0]) if isinstance(args, list) and args else ""


def spawned_jobs(jobs: dict[int, Row], executions: Sequence[Row]) -> dict[str, int]:
    """The jobs spawned by attempts the store accepted (a succeeded execution), by token.

    What the plain verdict judges beside the submitted jobs; a set spawned by
    another attempt is not among them (:func:`judge_workflows` counts it).
    """
    accepted = {str(row["lease_token"]) for row in executions if row["outcome"] == "succeeded"}
    return {
        _token(row): job_id
        for job_id, row in sorted(jobs.items())
        if _spawning_lease(row) in accepted
    }


class _Record:
    """The store's rows of the run, indexed for the rules."""

    def __init__(
        self,
        jobs: dict[int, Row],
        executions: Sequence[Row],
        edges: Sequence[Row],
        runs: dict[str, list[Run]],
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.by_job: dict[int, list[Row]] = {}
        for execution in sorted(executions, key=lambda row: int(row["id"])):
            self.by_job.setdefault(int(execution["job_id"]), []).append(execution)
        ordered = sorted(edges, key=lambda row: (int(row["child_id"]), int(row["position"])))
        self.parents: dict[int, list[int]] = {}
        for edge in ordered:
            self.parents.setdefault(int(edge["child_id"]), []).append(int(edge["parent_id"]))
        self.by_lease = {str(row["lease_token"]): row for row in executions}
        # Every spawned job, by the lease token of the attempt that spawned it.
        self.spawned: dict[str, list[Row]] = {}
        for job_id in sorted(jobs):
            lease = _spawning_lease(jobs[job_id])
            if lease is not None:
                self.spawned.setdefault(lease, []).append(jobs[job_id])

    def state(self, job_id: int) -> str:
        row = self.jobs.get(job_id)
        return "missing" if row is None else str(row["state"])

    def end(self, job_id: int) -> float | None:
        """When the job ended on the store's clock (None: it has not); see the module doc."""
        row = self.jobs.get(job_id)
        if row is None or str(row["state"]) not in _ENDED:
            return None
        ends = [_time(row["finished_at"])]
        attempts = self.by_job.get(job_id, [])
        if attempts:
            ends.append(_time(attempts[-1]["finished_at"]))
        known = [end for end in ends if end is not None]
        return max(known) if len(known) == len(ends) else None

    def accepted_run(self, job_id: int, token: str) -> Run | None:
        """The ledger's run whose outcome the store accepted, when it names one that ended."""
        row = self.jobs.get(job_id)
        if row is None:
            return None
        attempt: str | None = None
        result = stored_json(row["result"])
        if isinstance(result, dict) and result.get("attempt") is not None:
            attempt = str(result["attempt"])
        error = stored_json(row["error"])
        if attempt is None and isinstance(error, dict):
            found = _ATTEMPT.search(str(error.get("message", "")))
            attempt = found.group(1) if found else None
        run = next((run for run in self.runs.get(token, []) if run.attempt == attempt), None)
        return run if run is not None and run.ended else None

    def spawn_sets(self, spawner: int, tokens: Sequence[str]) -> dict[str, list[Row]]:
        """The jobs spawned by each attempt of ``spawner``, or bearing one of the ``tokens``
        it spawns, by the lease token in their keys."""
        leases = {str(row["lease_token"]) for row in self.by_job.get(spawner, [])}
        return {
            lease: rows
            for lease, rows in self.spawned.items()
            if lease in leases or any(_token(row) in tokens for row in rows)
        }


def judge_workflows(
    plans: Sequence[WorkflowPlan],
    submitted: dict[str, int],
    jobs: dict[int, Row],
    executions: Sequence[Row],
    edges: Sequence[Row],
    runs: dict[str, list[Run]],
    chaos_ended: float,
) -> dict[str, Any]:
    """The counts of :data:`TARGETS`, their examples and the workflows' figures.

    ``submitted`` maps tokens to the ids of the jobs the run submitted (a
    workflow not in it was never submitted, and is counted as such
    elsewhere); the spawned jobs are found in ``jobs`` (:func:`spawned_jobs`);
    ``edges`` are job_parents rows; ``chaos_ended`` (unix time) splits the
    figures into the chaos and the drain after it.
    """
    record = _Record(jobs, executions, edges, runs)
    ids = submitted | spawned_jobs(jobs, executions)
    found: dict[str, dict[str, str]] = {name: {} for name in TARGETS}
    token_of = {job_id: token for token, job_id in ids.items()}
    phases = {
        phase: {"children_run": 0, "fan_ins_run": 0, "spawned_run": 0, "early": 0}
        for phase in _PHASES
    }
    figures: dict[str, Any] = {
        "workflows": 0, "jobs": 0, "fan_ins": 0, "cancelled_by_parent": 0, "ran_anyway": 0,
        "after_reclaimed_parent": 0, "closest_claim": None, "closest_start": None,
        "spawners": 0, "spawned": 0, "spawns_unaccepted": 0,
    }  # fmt: skip
    for plan in plans:
        if plan.jobs[0].token not in submitted:
            continue
        figures["workflows"] += 1
        expected = plan.expected()
        for position, job in enumerate(plan.whole):
            if job.token not in ids:
                if job.spawner is not None:
                    found["wf_lost"][job.token] = "not spawned by its spawner's accepted attempt"
                continue  # else a late job whose request did not land: counted as unsubmitted
            figures["jobs"] += 1
            figures["spawned"] += job.spawner is not None
            job_id = ids[job.token]
            _check_as_planned(record, plan, job, job_id, expected[job.token], ids, found)
            spawns = [spawned.token for spawned in plan.spawned_by(position)]
            problem = _check_spawn(record, job_id, spawns, figures) if spawns else None
            if problem is not None:
                found["wf_spawn"][job.token] = problem
            parents = record.parents.get(job_id, [])
            # A spawned job is written with its spawner's success: it must not start sooner.
            spawner = None if job.spawner is None else ids.get(plan.whole[job.spawner].token)
            after = parents + ([] if spawner is None else [spawner])
            if not after:
                continue
            figures["fan_ins"] += len(parents) > 1
            claims = _check_order(record, job.token, job_id, after, token_of, found, figures)
            phase = _phase(min(claims, default=None), chaos_ended)
            if phase is not None:
                early = job.token in found["wf_early"]
                _count_claimed(phases[phase], record, parents, spawner is not None, early, figures)
            if parents:
                _check_outcome(record, job.token, job_id, parents, found, figures)
    return {
        **{name: len(found[name]) for name in TARGETS},
        "examples": {name: dict(list(found[name].items())[:10]) for name in TARGETS},
        "workflows": {**figures, "phases": phases},
    }


def _count_claimed(
    counts: dict[str, int],
    record: _Record,
    parents: list[int],
    spawned: bool,
    early: bool,
    figures: dict[str, Any],
) -> None:
    """A child or spawned job first claimed in the phase ``counts`` are of."""
    counts["early"] += early
    counts["spawned_run"] += spawned
    if not parents:
        return
    counts["children_run"] += 1
    counts["fan_ins_run"] += len(parents) > 1
    # A parent claimed again (a fault took its lease): the child had to wait
    # for the second claim's end, not the first's.
    reclaimed = any(len(record.by_job.get(parent, [])) > 1 for parent in parents)
    figures["after_reclaimed_parent"] += reclaimed


_PHASES = ("chaos", "drain")


def _phase(claim: float | None, chaos_ended: float) -> str | None:
    if claim is None:
        return None
    return "chaos" if claim <= chaos_ended else "drain"


def _check_as_planned(
    record: _Record,
    plan: WorkflowPlan,
    job: WorkflowJob,
    job_id: int,
    expected: str,
    ids: dict[str, int],
    found: dict[str, dict[str, str]],
) -> None:
    """wf_stuck and wf_lost: the job is in the store, ended, as its shape says."""
    state = record.state(job_id)
    if state in _ACTIVE:
        found["wf_stuck"][job.token] = state
        return
    planned = [ids.get(plan.whole[position].token) for position in job.parents]
    stored = record.parents.get(job_id, [])
    if state == "missing":
        found["wf_lost"][job.token] = "missing from the store"
    elif state != expected:
        found["wf_lost"][job.token] = f"ended {state}, its shape says {expected}"
    elif stored != planned and None not in planned:  # a parent not spawned is lost itself
        found["wf_lost"][job.token] = f"stored parents {stored}, submitted {planned}"
    elif bool(record.jobs[job_id]["run_anyway"]) != job.run_anyway:
        found["wf_lost"][job.token] = f"run_anyway stored as {record.jobs[job_id]['run_anyway']}"


def _check_spawn(
    record: _Record, spawner: int, tokens: list[str], figures: dict[str, Any]
) -> str | None:
    """wf_spawn: what the spawner spawned is one set, from the attempt the store accepted;
    what is wrong with it, if anything."""
    figures["spawners"] += 1
    attempts = record.by_job.get(spawner, [])
    figures["spawns_unaccepted"] += sum(row["outcome"] != "succeeded" for row in attempts)
    return _spawn_problem(record, spawner, tokens, record.spawn_sets(spawner, tokens))


def _spawn_problem(
    record: _Record, spawner: int, tokens: list[str], sets: dict[str, list[Row]]
) -> str | None:
    """What is wrong with the spawner's spawned jobs (``sets``, by lease token); None: nothing.

    A token missing from the set is not counted here: that job is lost, and counted so.
    """
    if len(sets) != 1:
        named = ", ".join(_execution(record, lease) for lease in sets)
        return f"{len(sets)} sets spawned: {named}" if sets else "spawned nothing"
    [(lease, rows)] = sets.items()
    execution = record.by_lease.get(lease)
    if execution is None or int(execution["job_id"]) != spawner:
        return f"its spawned jobs' keys name {_execution(record, lease)}"
    if execution["outcome"] != "succeeded":
        return f"spawned by {_execution(record, lease)}, an attempt the store did not accept"
    spawned = [_token(row) for row in rows]
    twice = sorted({each for each in spawned if spawned.count(each) > 1})
    if twice:
        return f"spawned {', '.join(twice)} more than once"
    strange = [each for each in spawned if each not in tokens]
    if strange:
        return f"spawned {', '.join(strange)}, not of its shape"
    home = record.jobs[spawner]["workflow_id"]
    astray = [int(row["id"]) for row in rows if row["workflow_id"] != home]
    return f"spawned jobs {astray} outside its workflow {home}" if astray else None


def _execution(record: _Record, lease: str) -> str:
    """The attempt that holds ``lease``, as the examples name it."""
    row = record.by_lease.get(lease)
    if row is None:
        return f"lease {lease[:8]}, of no execution"
    return f"execution {row['id']} of job {row['job_id']} ({row['outcome']})"


def _check_order(
    record: _Record,
    token: str,
    job_id: int,
    parents: list[int],
    token_of: dict[int, str],
    found: dict[str, dict[str, str]],
    figures: dict[str, Any],
) -> list[float]:
    """wf_early, in the store and in the ledger; the claims of the job's executions."""
    claims = []
    for execution in record.by_job.get(job_id, []):
        claim = _time(execution["claimed_at"])
        claim = _time(execution["started_at"]) if claim is None else claim
        if claim is None:
            continue
        claims.append(claim)
        for parent in parents:
            end = record.end(parent)
            if end is None or claim < end:
                ended = "had not ended" if end is None else f"ended at {end:.3f}"
                found["wf_early"][token] = (
                    f"execution {execution['id']} claimed at {claim:.3f}; parent {parent} "
                    f"({record.state(parent)}) {ended}"
                )
            else:
                figures["closest_claim"] = _least(figures["closest_claim"], claim - end)
    for run in record.runs.get(token, []):
        for parent in parents:
            accepted = record.accepted_run(parent, token_of.get(parent, ""))
            if accepted is None:
                continue
            if run.start <= accepted.last:
                found["wf_early"][token] = (
                    f"run {run.attempt[:6]} started at {run.start:.6f}, before parent "
                    f"{parent}'s run {accepted.attempt[:6]} ended at {accepted.last:.6f}"
                )
            else:
                gap = run.start - accepted.last
                figures["closest_start"] = _least(figures["closest_start"], gap)
    return claims


def _check_outcome(
    record: _Record,
    token: str,
    job_id: int,
    parents: list[int],
    found: dict[str, dict[str, str]],
    figures: dict[str, Any],
) -> None:
    """wf_not_run and wf_cascade: the child did what its parents' ends say it must."""
    states = [record.state(parent) for parent in parents]
    if any(state not in _ENDED for state in states):
        return  # a parent never ended: that parent is stuck or lost, and counted so
    row = record.jobs.get(job_id)
    if row is None:
        return
    state = str(row["state"])
    attempts = record.by_job.get(job_id, [])
    anyway = bool(row["run_anyway"])
    failed_parents = [state for state in states if state != "succeeded"]
    if failed_parents and not anyway:
        if state != "cancelled" or attempts:
            found["wf_cascade"][token] = (
                f"ended {state} after {len(attempts)} executions; parents ended "
                + ", ".join(states)
            )
        else:
            figures["cancelled_by_parent"] += 1
        return
    ran = any(str(execution["outcome"]) == "succeeded" for execution in attempts)
    if state != "succeeded" or not ran:
        found["wf_not_run"][token] = (
            f"ended {state} after {len(attempts)} executions"
            + (" (run_anyway)" if anyway else "")
            + "; parents ended "
            + ", ".join(states)
        )
    elif failed_parents:
        figures["ran_anyway"] += 1


def submissions(
    submits: Sequence[tuple[float, float]],
    kills: Sequence[float],
    gaps: Sequence[float | None],
    resent: int,
) -> dict[str, Any]:
    """How the workflows' requests fared: the slowest, and how many met a leader kill.

    ``submits`` are (start, end) and ``kills`` the leader kills, in monotonic
    seconds; ``gaps`` how long after each kill the store took a write again
    (None: it never did). A request met a kill when it was under way at some
    moment between the kill and that write.
    """
    met = 0
    for start, end in submits:
        for kill, gap in zip(kills, gaps, strict=True):
            back = kill + (gap if gap is not None else math.inf)
            if start <= back and end >= kill:
                met += 1
                break
    slowest = max((end - start for start, end in submits), default=0.0)
    return {"slowest_submit": round(slowest, 3), "met_leader_kill": met, "resent": resent}


def summary_lines(verdict: dict[str, Any]) -> list[str]:
    """The workflows' figures, for the chaos run's summary (the counts are its table rows)."""
    figures = verdict.get("workflows")
    if not figures or not figures["workflows"]:
        return []

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    lines = [
        f"workflows: {figures['workflows']} ({figures['jobs']} jobs, {figures['fan_ins']} "
        f"fan-ins); {figures['cancelled_by_parent']} children cancelled by a failed parent, "
        f"{figures['ran_anyway']} ran anyway after one; {figures['after_reclaimed_parent']} "
        "children ran after a parent claimed more than once (a fault took its lease)",
        f"  spawns: {figures['spawned']} jobs spawned by {figures['spawners']} spawners; "
        f"{figures['spawns_unaccepted']} spawner executions that did not succeed (killed, "
        "fenced, handed back or failed: none may have spawned)",
    ]
    if "slowest_submit" in figures:
        lines.append(
            f"  a workflow request took {figures['slowest_submit']:.2f} s at most; "
            f"{figures['met_leader_kill']} requests met a leader kill (under way before the "
            f"store took writes again), {figures['resent']} were sent again after a store error"
        )
    for phase, counts in figures["phases"].items():
        lines.append(
            f"  in the {phase}: {counts['children_run']} children first claimed "
            f"({counts['fan_ins_run']} fan-ins) and {counts['spawned_run']} spawned jobs, "
            f"{counts['early']} of them before a parent (or spawner) ended"
        )
    lines.append(
        f"  closest after a parent's (or spawner's) end: a claim "
        f"{seconds(figures['closest_claim'])} (store clock), a start "
        f"{seconds(figures['closest_start'])} (ledger)"
    )
    return lines
