"""The chaos run's workflows: their shapes, what each of their jobs must end as, their submission.

Beside the plain jobs, the chaos run submits ``--workflows`` workflows, each
written whole in one request (``taskq.broker.ops.workflows.workflow_submit``)
under one idempotency key, so that a request whose outcome a leader kill
left unknown can be sent again without making a second workflow. Their
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

What every job must end as follows from the shape (:func:`expected_states`);
:mod:`bench.chaos_workflow_verdict` judges the store's record against it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from bench.chaos_faults import WORKFLOW_LONG_PREFIX
from taskq import errors
from taskq.broker.client.client_base import call_spec
from taskq.broker.ops import plan as op_plan
from taskq.broker.ops.workflows import workflow_submit
from taskq.broker.records import SubmittedWorkflow, WorkflowSubmission
from taskq.broker.stores.store import Store
from taskq.retry import RetryPolicy

# A failing parent fails once and for good: its ChaosFailure (a ValueError) is not retried.
_NO_RETRY = RetryPolicy(dont_retry_on=("ValueError",))


@dataclass(frozen=True)
class WorkflowJob:
    """One job of a workflow: its token, how long it works, its parents (positions)."""

    token: str
    seconds: float
    parents: tuple[int, ...] = ()  # positions in the workflow, each before this one
    fails: bool = False  # runs chaos_jobs.fail: ends failed after one complete run
    run_anyway: bool = False


@dataclass(frozen=True)
class WorkflowPlan:
    """One workflow to submit whole, under ``key``."""

    key: str
    shape: str
    jobs: tuple[WorkflowJob, ...]

    def expected(self) -> dict[str, str]:
        return dict(zip((job.token for job in self.jobs), expected_states(self.jobs), strict=True))


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
    ) -> int:
        position = len(self.jobs)
        prefix = WORKFLOW_LONG_PREFIX if seconds is not None else "w"
        token = f"{prefix}{self.number:03d}j{position:02d}"
        if seconds is None:
            seconds = self.rng.uniform(0.005, self.short_seconds)
        self.jobs.append(WorkflowJob(token, seconds, parents, fails, run_anyway))
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


SHAPES: dict[str, Callable[[_Shaper, int, tuple[float, float] | None], None]] = {
    "fan-in": _fan_in,
    "chain": _chain,
    "diamond": _diamond,
    "failed fan-in": _failed_fan_in,
    "failed chain": _failed_chain,
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


def submission(plan: WorkflowPlan, ledger: Path, queue: str) -> WorkflowSubmission:
    """The workflow as one request: the jobs' specs and their parents' positions."""
    specs = []
    for job in plan.jobs:
        spec = call_spec(
            "bench.chaos_jobs:fail" if job.fails else "bench.chaos_jobs:work",
            (job.token, job.seconds, str(ledger)),
            queue=queue,
            max_attempts=100,  # as the plain jobs: a job may be hit many times
            timeout=60 + 3 * job.seconds,
            retry=_NO_RETRY if job.fails else None,
        )
        specs.append(msgspec.structs.replace(spec, run_anyway=job.run_anyway))
    return WorkflowSubmission(
        jobs=tuple(specs),
        parents=tuple(job.parents for job in plan.jobs),
        name=f"chaos {plan.shape}",
        idempotency_key=plan.key,
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
) -> tuple[SubmittedWorkflow | None, int]:
    """Submit ``plan`` until it lands (None when it did not: it stays unsubmitted), and
    how many times a store error made it send the request again.

    A store error is sent again (the workflow's key makes that safe) for up
    to ``give_up_after`` seconds; a refusal is not, and is said.
    """
    request = submission(plan, ledger, queue)
    give_up = time.monotonic() + give_up_after
    resent = 0
    while True:
        try:
            return op_plan.run(store, workflow_submit(request)), resent
        except errors.InvalidJob as exc:  # IdempotencyConflict among them: resending is no help
            say(f"workflow {plan.key} refused: {exc}")
            return None, resent
        except errors.TaskqError as exc:
            if time.monotonic() > give_up or stopped():
                say(f"gave up submitting workflow {plan.key}: {exc}")
                return None, resent
            resent += 1
            time.sleep(0.2)
