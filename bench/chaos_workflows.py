"""The chaos run's workflows: their shapes, what each of their jobs must end as, their submission.

Beside the plain jobs, the chaos run submits ``--workflows`` workflows, each
written whole in one request (``taskq.broker.ops.workflows.workflow_submit``;
a late fan-in's late jobs in a second one) under one idempotency key, so
that a request whose outcome a leader kill left unknown can be sent again
without making a second workflow. Their
jobs are the plain jobs' ``chaos_jobs.work`` (or ``chaos_jobs.fail``, which
ends ``failed`` for good, or ``chaos_spawn_jobs.spawn_fan_in``, which works
and then spawns), with tokens ``w<n>j<i>``; a long parent's token
starts with ``L`` (``Lw<n>j<i>``), so that the faults, which prefer workers
running long jobs, hit workflow parents mid-run too. The shapes, in turn:

fan-in         ``--fan-in-width`` parents, the first one or two of them long
               (``long_parents``), into one fan-in, and a job after the fan-in
spawned fan-in a root that, once it has worked, spawns ``--fan-in-width``
               jobs and a fan-in over them (tokens ``w<n>j00s<i>``, from its
               own: ``chaos_spawn_jobs.spawned_token``), and a job after the root,
               submitted with it; the spawned jobs do not wait for the root (they
               are written with its success): of them, only the fan-in has
               parents. In turn the root is long (the faults meet it
               before it spawns), or the first job it spawns is (they meet that
               one while the spawned fan-in waits for it)
chain          four jobs, each after the one before
diamond        a root, two jobs after it, and a join after both
failed fan-in  a fan-in whose parents include one that fails: the fan-in and
               the job after it end cancelled; a ``run_anyway`` fan-in over the
               same parents runs, and so does the job after it
failed chain   a root that fails: its child and grandchild end cancelled; a
               ``run_anyway`` job after the child runs though its parent was
               cancelled
late fan-in    parents and a job that fails, and, in a second request sent
               :data:`LATE_SECONDS` after the first landed (some parents have
               ended by then, some not), jobs that join the workflow naming
               them as stored parents (``after``): a fan-in over the parents
               (runs), a child of the failing job (ends cancelled, at once if
               that job has failed already) and a ``run_anyway`` fan-in over all

What every job must end as follows from the shape (:func:`expected_states`);
:mod:`bench.chaos_workflow_verdict` judges the store's record against it. A
plan's ``jobs`` are those the run submits; its ``spawned`` ones come after
them (the positions of ``parents`` count through both), found in the store
after the run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.chaos_faults import WORKFLOW_LONG_PREFIX
from bench.chaos_spawn_jobs import job_options, spawned_token
from taskq import errors
from taskq.broker.client.specs import call_spec
from taskq.broker.ops import plan as op_plan
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import JobSpec, SubmittedWorkflow, WorkflowSubmission
from taskq.broker.stores.store import Store
from taskq.retry import RetryPolicy

# A failing parent fails once and for good: its ChaosFailure (a ValueError) is not retried.
_NO_RETRY = RetryPolicy(dont_retry_on=("ValueError",))
# How long after a workflow lands its late jobs are sent: about a short job's run, so
# that some of their parents have ended and some have not.
LATE_SECONDS = 0.3


@dataclass(frozen=True)
class WorkflowJob:
    """One job of a workflow: its token, how long it works, its parents (positions)."""

    token: str
    seconds: float
    parents: tuple[int, ...] = ()  # positions in the workflow, each before this one
    fails: bool = False  # runs chaos_jobs.fail: ends failed after one complete run
    run_anyway: bool = False
    late: bool = False  # sent in a second request, its parents named as stored jobs
    spawner: int | None = None  # the position of the job that spawns it; None: submitted


@dataclass(frozen=True)
class WorkflowPlan:
    """One workflow to submit whole, under ``key``, and the jobs its spawners spawn."""

    key: str
    shape: str
    jobs: tuple[WorkflowJob, ...]  # those the run submits
    spawned: tuple[WorkflowJob, ...] = ()  # those its jobs spawn, at the positions after them

    @property
    def whole(self) -> tuple[WorkflowJob, ...]:
        """Every job, submitted then spawned: what the positions of ``parents`` count."""
        return self.jobs + self.spawned

    def expected(self) -> dict[str, str]:
        tokens = (job.token for job in self.whole)
        return dict(zip(tokens, expected_states(self.whole), strict=True))

    def spawned_by(self, position: int) -> tuple[WorkflowJob, ...]:
        """What the job at ``position`` spawns, in the order it spawns them."""
        return tuple(job for job in self.spawned if job.spawner == position)

    @property
    def first(self) -> tuple[WorkflowJob, ...]:
        """The jobs of the first request: all but the late ones, which come last."""
        return tuple(job for job in self.jobs if not job.late)


def expected_states(jobs: tuple[WorkflowJob, ...]) -> list[str]:
    """What each job must end as: cancelled by a parent that did not succeed, unless it
    runs anyway; else failed if it fails, else succeeded. (A spawner never fails: what
    it spawns is always written.)"""
    states: list[str] = []
    for job in jobs:
        parents_fine = all(states[position] == "succeeded" for position in job.parents)
        if not parents_fine and not job.run_anyway:
            states.append("cancelled")
        else:
            states.append("failed" if job.fails else "succeeded")
    return states


class _Shaper:
    """Builds one workflow's jobs, numbering their tokens."""

    def __init__(
        self, number: int, rng: random.Random, short_seconds: float, long_parents: int
    ) -> None:
        self.number = number
        self.rng = rng
        self.short_seconds = short_seconds
        self.long_parents = long_parents  # of a fan-in
        self.jobs: list[WorkflowJob] = []

    def add(
        self,
        parents: tuple[int, ...] = (),
        *,
        seconds: float | None = None,
        fails: bool = False,
        run_anyway: bool = False,
        late: bool = False,
        spawner: int | None = None,
    ) -> int:
        position = len(self.jobs)
        # The late jobs come last and name only jobs of the first request as parents.
        assert late or not any(job.late for job in self.jobs)
        assert not any(self.jobs[parent].late for parent in parents)
        # The spawned jobs come after every submitted one, each spawned by one that succeeds.
        assert spawner is not None or not any(job.spawner is not None for job in self.jobs)
        assert spawner is None or not self.jobs[spawner].fails
        if spawner is not None:
            siblings = sum(job.spawner == spawner for job in self.jobs)
            token = spawned_token(self.jobs[spawner].token, siblings, long=seconds is not None)
        else:
            prefix = WORKFLOW_LONG_PREFIX if seconds is not None else "w"
            token = f"{prefix}{self.number:03d}j{position:02d}"
        if seconds is None:
            seconds = self.rng.uniform(0.005, self.short_seconds)
        self.jobs.append(WorkflowJob(token, seconds, parents, fails, run_anyway, late, spawner))
        return position


def _fan_in(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    parents = []
    for index in range(width):
        long = long_seconds if index < shape.long_parents else None
        parents.append(shape.add(seconds=None if long is None else shape.rng.uniform(*long)))
    fan_in = shape.add(tuple(parents))
    shape.add((fan_in,))


def _spawned_fan_in(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    long = None if long_seconds is None else shape.rng.uniform(*long_seconds)
    # Each time this shape comes round, the spawner or, the next time, its first spawned job
    # is long: the faults meet a spawner before it spawns, or a spawned job that the
    # spawned fan-in waits for.
    long_spawner = shape.number // len(SHAPES) % 2 == 0
    spawner = shape.add(seconds=long if long_spawner else None)
    shape.add((spawner,))
    children = tuple(
        shape.add(spawner=spawner, seconds=None if long_spawner or index else long)
        for index in range(width)
    )
    shape.add(children, spawner=spawner)


def _chain(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    previous = shape.add()
    for _ in range(3):
        previous = shape.add((previous,))


def _diamond(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    root = shape.add()
    left, right = shape.add((root,)), shape.add((root,))
    shape.add((left, right))


def _failed_fan_in(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    failing = shape.rng.randrange(width)
    parents = tuple(shape.add(fails=index == failing) for index in range(width))
    doomed = shape.add(parents)
    shape.add((doomed,))
    anyway = shape.add(parents, run_anyway=True)
    shape.add((anyway,))


def _failed_chain(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    root = shape.add(fails=True)
    child = shape.add((root,))
    shape.add((child,))
    shape.add((child,), run_anyway=True)


def _late_fan_in(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    parents = tuple(shape.add() for _ in range(width))
    failing = shape.add(fails=True)
    shape.add(parents, late=True)
    shape.add((failing,), late=True)
    shape.add((*parents, failing), run_anyway=True, late=True)


SHAPES: dict[str, Callable[[_Shaper, int, tuple[float, float] | None], None]] = {
    "fan-in": _fan_in,
    "spawned fan-in": _spawned_fan_in,
    "chain": _chain,
    "diamond": _diamond,
    "failed fan-in": _failed_fan_in,
    "failed chain": _failed_chain,
    "late fan-in": _late_fan_in,
}


def plan_workflows(
    count: int,
    width: tuple[int, int],
    long_seconds: tuple[float, float],
    short_seconds: float,
    rng: random.Random,
    long_parents: int = 1,
) -> list[WorkflowPlan]:
    """``count`` workflows, the shapes in turn; fan-ins ``width`` (least, most) wide, the
    first ``long_parents`` parents of each long."""
    plans = []
    names = list(SHAPES)
    for number in range(count):
        name = names[number % len(names)]
        shape = _Shaper(number, rng, short_seconds, long_parents)
        # A fan-in's first parent is long, for the faults to meet while the fan-in waits,
        # and so is a spawner or the first job it spawns (see _spawned_fan_in).
        long = long_seconds if name in _LONG_SHAPES else None
        SHAPES[name](shape, rng.randint(*width), long)
        submitted = tuple(job for job in shape.jobs if job.spawner is None)
        spawned = tuple(job for job in shape.jobs if job.spawner is not None)
        plans.append(WorkflowPlan(f"chaos-wf-{number:03d}", name, submitted, spawned))
    return plans


_LONG_SHAPES = ("fan-in", "spawned fan-in")


def _spec(
    job: WorkflowJob,
    ledger: Path,
    queue: str,
    after: tuple[int, ...] = (),
    spawns: tuple[WorkflowJob, ...] = (),
) -> JobSpec:
    target, args = _call(job, ledger, spawns)
    spec = call_spec(
        target,
        args,
        queue=queue,
        retry=_NO_RETRY if job.fails else None,
        **job_options(job.seconds),
    )
    return msgspec.structs.replace(spec, run_anyway=job.run_anyway, after=after)


def _call(
    job: WorkflowJob, ledger: Path, spawns: tuple[WorkflowJob, ...]
) -> tuple[str, tuple[object, ...]]:
    """What the job calls, with what: a spawner is given what it spawns, children then fan-in."""
    common = (job.token, job.seconds, str(ledger))
    if not spawns:
        return ("bench.chaos_jobs:fail" if job.fails else "bench.chaos_jobs:work"), common
    *children, fan_in = spawns
    long = sum(child.token.startswith(WORKFLOW_LONG_PREFIX) for child in children)
    # chaos_spawn_jobs.spawn_fan_in spawns exactly this: the children, the first ``long``
    # of them long, then a fan-in over all, with these tokens.
    assert not any(child.parents for child in children)
    assert len(fan_in.parents) == len(children)
    tokens = [spawned_token(job.token, at, at < long) for at in range(len(spawns))]
    assert tokens == [spawned.token for spawned in spawns]
    seconds = [child.seconds for child in children]
    return "bench.chaos_spawn_jobs:spawn_fan_in", (*common, seconds, fan_in.seconds, long)


def submission(plan: WorkflowPlan, ledger: Path, queue: str) -> WorkflowSubmission:
    """The workflow's first request: its jobs but the late ones, and their parents' positions."""
    return WorkflowSubmission(
        jobs=tuple(
            _spec(job, ledger, queue, spawns=plan.spawned_by(position))
            for position, job in enumerate(plan.first)
        ),
        parents=tuple(job.parents for job in plan.first),
        name=f"chaos {plan.shape}",
        idempotency_key=plan.key,
        submitter="chaos",
    )


def late_submission(
    plan: WorkflowPlan, landed: SubmittedWorkflow, ledger: Path, queue: str
) -> WorkflowSubmission:
    """The workflow's second request: its late jobs, joining the stored workflow, each
    naming its parents by their stored ids."""
    late = [job for job in plan.jobs if job.late]
    return WorkflowSubmission(
        jobs=tuple(
            _spec(job, ledger, queue, tuple(landed.job_ids[parent] for parent in job.parents))
            for job in late
        ),
        workflow_id=landed.id,
        idempotency_key=f"{plan.key}/late",
        submitter="chaos",
    )


def submit(
    store: Store,
    plan: WorkflowPlan,
    ledger: Path,
    queue: str,
    *,
    give_up_after: float,
    stopped: Callable[[], bool],
    say: Callable[[str], None],
) -> Sender:
    """Submit ``plan``, its late jobs :data:`LATE_SECONDS` after the rest; what landed.

    A store error is sent again (each request's key makes that safe) for up
    to ``give_up_after`` seconds; a refusal is not, and is said. What did
    not land stays unsubmitted.
    """
    sender = Sender(store, plan.key, time.monotonic() + give_up_after, stopped, say)
    landed = sender.send(submission(plan, ledger, queue))
    if landed is None:
        return sender
    sender.ids = dict(zip((job.token for job in plan.first), landed.job_ids, strict=True))
    late = [job for job in plan.jobs if job.late]
    if late:
        time.sleep(LATE_SECONDS)
        joined = sender.send(late_submission(plan, landed, ledger, queue))
        if joined is not None:
            sender.ids |= zip((job.token for job in late), joined.job_ids, strict=True)
    return sender


@dataclass
class Sender:
    """Sends a workflow's requests until each lands (or ``give_up`` passes, monotonic)."""

    store: Store
    key: str
    give_up: float
    stopped: Callable[[], bool]
    say: Callable[[str], None]
    ids: dict[str, int] = field(default_factory=dict)  # of the jobs that landed, by token
    requests: list[tuple[float, float]] = field(default_factory=list)  # (start, end), monotonic
    resent: int = 0  # requests sent again after a store error

    def send(self, request: WorkflowSubmission) -> SubmittedWorkflow | None:
        began = time.monotonic()
        try:
            return self._send(request)
        finally:
            self.requests.append((began, time.monotonic()))

    def _send(self, request: WorkflowSubmission) -> SubmittedWorkflow | None:
        while True:
            try:
                return op_plan.run(self.store, workflow_submit(request))
            except errors.InvalidJob as exc:  # IdempotencyConflict among them: no resend helps
                self.say(f"workflow {self.key} refused: {exc}")
                return None
            except errors.TaskqError as exc:
                if time.monotonic() > self.give_up or self.stopped():
                    self.say(f"gave up submitting workflow {self.key}: {exc}")
                    return None
                self.resent += 1
                time.sleep(0.2)
