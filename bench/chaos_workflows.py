"""The chaos run's workflows: their shapes, what each of their jobs must end as, their submission.

Beside the plain jobs, the chaos run submits ``--workflows`` workflows, each
written whole in one request (``taskq.broker.ops.workflows.workflow_submit``;
a late fan-in's late jobs in a second one) under one idempotency key, so
that a request whose outcome a leader kill left unknown can be sent again
without making a second workflow. Their
jobs are the plain jobs' ``chaos_jobs.work`` (or ``chaos_jobs.fail``, which
ends ``failed`` for good), with tokens ``w<n>j<i>``; a long parent's token
starts with ``L`` (``Lw<n>j<i>``), so that the faults, which prefer workers
running long jobs, hit workflow parents mid-run too. The shapes, in turn:

fan-in         ``--fan-in-width`` parents, the first one or two of them long
               (``long_parents``), into one fan-in, and a job after the fan-in
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
:mod:`bench.chaos_workflow_verdict` judges the store's record against it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.chaos_faults import WORKFLOW_LONG_PREFIX
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


@dataclass(frozen=True)
class WorkflowPlan:
    """One workflow to submit whole, under ``key``."""

    key: str
    shape: str
    jobs: tuple[WorkflowJob, ...]

    def expected(self) -> dict[str, str]:
        return dict(zip((job.token for job in self.jobs), expected_states(self.jobs), strict=True))

    @property
    def first(self) -> tuple[WorkflowJob, ...]:
        """The jobs of the first request: all but the late ones, which come last."""
        return tuple(job for job in self.jobs if not job.late)


def expected_states(jobs: tuple[WorkflowJob, ...]) -> list[str]:
    """What each job must end as: cancelled by a parent that did not succeed, unless it
    runs anyway; else failed if it fails, else succeeded."""
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
    ) -> int:
        position = len(self.jobs)
        # The late jobs come last and name only jobs of the first request as parents.
        assert late or not any(job.late for job in self.jobs)
        assert not any(self.jobs[parent].late for parent in parents)
        prefix = WORKFLOW_LONG_PREFIX if seconds is not None else "w"
        token = f"{prefix}{self.number:03d}j{position:02d}"
        if seconds is None:
            seconds = self.rng.uniform(0.005, self.short_seconds)
        self.jobs.append(WorkflowJob(token, seconds, parents, fails, run_anyway, late))
        return position


def _fan_in(shape: _Shaper, width: int, long_seconds: tuple[float, float] | None) -> None:
    parents = []
    for index in range(width):
        long = long_seconds if index < shape.long_parents else None
        parents.append(shape.add(seconds=None if long is None else shape.rng.uniform(*long)))
    fan_in = shape.add(tuple(parents))
    shape.add((fan_in,))


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
        # A fan-in's first parent is long, for the faults to meet while the fan-in waits.
        long = long_seconds if name == "fan-in" else None
        SHAPES[name](shape, rng.randint(*width), long)
        plans.append(WorkflowPlan(f"chaos-wf-{number:03d}", name, tuple(shape.jobs)))
    return plans


def _spec(job: WorkflowJob, ledger: Path, queue: str, after: tuple[int, ...] = ()) -> JobSpec:
    spec = call_spec(
        "bench.chaos_jobs:fail" if job.fails else "bench.chaos_jobs:work",
        (job.token, job.seconds, str(ledger)),
        queue=queue,
        max_attempts=100,  # as the plain jobs: a job may be hit many times
        timeout=60 + 3 * job.seconds,
        retry=_NO_RETRY if job.fails else None,
    )
    return msgspec.structs.replace(spec, run_anyway=job.run_anyway, after=after)


def submission(plan: WorkflowPlan, ledger: Path, queue: str) -> WorkflowSubmission:
    """The workflow's first request: its jobs but the late ones, and their parents' positions."""
    return WorkflowSubmission(
        jobs=tuple(_spec(job, ledger, queue) for job in plan.first),
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
