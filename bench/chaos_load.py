"""The chaos run's load: the job mix, and the threads that submit it, watch the store and probe it.

:func:`plan_jobs` makes the plain jobs (short ones, and long ones among the
first of them); a :class:`Background` submits them in paced batches,
watches the store once a second (how many jobs have finished, which worker
runs which, who holds the maintenance lease: what the faults pick their
victims by) and, on rqlite, times a small write every 50 ms. Run by
:mod:`bench.chaos`, whose options (``chaos_options.Options``) it reads.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench import chaos_workflows
from bench.chaos_workflows import WorkflowPlan
from taskq import errors
from taskq.broker.client.client import Client, JobQuery, call_spec
from taskq.broker.records import FINISHED_STATES, JobState
from taskq.broker.stores.store import Statement

if TYPE_CHECKING:
    from bench.chaos_options import Options

QUEUE = "chaos"
PROBE_QUEUE = "chaos-probe"  # no worker takes from it: the probe's jobs just sit there
PROBE_INTERVAL = 0.05
# Who holds the maintenance lease (taskq.broker.ops.maintenance.LEADER_LEASE): that
# worker requeues expired leases, and when it dies nobody does for up to 10 s.
_MAINTAINER = "SELECT holder FROM leader WHERE name = 'maintenance'"


# -- the job mix ----------------------------------------------------------------------------


@dataclass
class JobPlan:
    """One job to submit: ``chaos_jobs.work(token, seconds, ledger_dir)``."""

    token: str  # also the job's idempotency key; long jobs' tokens start with "L"
    seconds: float


def plan_jobs(
    jobs: int,
    long_jobs: int,
    long_seconds: tuple[float, float],
    short_seconds: float,
    front: float,
    rng: random.Random,
) -> list[JobPlan]:
    """Short jobs of up to ``short_seconds``, long ones among the first ``front`` share."""
    plans = [
        JobPlan(f"s{n:05d}", rng.uniform(0.005, short_seconds)) for n in range(jobs - long_jobs)
    ]
    for n in range(long_jobs):
        at = rng.randint(0, int(front * len(plans)))
        plans.insert(at, JobPlan(f"L{n:04d}", rng.uniform(*long_seconds)))
    return plans


# -- background threads: submitting, watching, probing ---------------------------------------


class Background:
    """The run's threads; each works until ``stop`` is set, and never raises."""

    def __init__(
        self, url: str, ledger: Path, options: Options, say: Callable[[str], None]
    ) -> None:
        self.url = url
        self.ledger = ledger
        self.options = options
        self.say = say
        self.stop = threading.Event()
        self.submitted: dict[str, int] = {}
        self.unsubmitted: list[str] = []
        self.workflows_resent = 0  # workflow requests sent again after a store error
        self.workflow_submits: list[tuple[float, float]] = []  # (start, end), monotonic
        self.submitting_done = threading.Event()
        self.finished = 0
        self.running: list[tuple[str, str]] = []  # (token, worker name) of running jobs
        # The most jobs the store counted running at once, in the chaos and in the drain
        # after it: running includes the jobs claimed ahead of a free slot.
        self.most_running = {"chaos": 0, "drain": 0}
        self.phase = "chaos"
        self.maintainer = ""  # the worker that runs maintenance (requeues expired leases)
        self.probes: list[tuple[float, float, bool]] = []  # (start, end, ok), monotonic
        self.threads: list[threading.Thread] = []

    def spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def submit(
        self,
        plans: list[JobPlan],
        span: float,
        workflows: list[WorkflowPlan] | None = None,
        workflow_span: float | None = None,
    ) -> None:
        """Submit the jobs in batches paced over ``span`` seconds, each batch until it lands,
        and the workflows, each whole, paced over ``workflow_span`` (None: ``span``).

        Every job carries its token as idempotency key, and every workflow a
        key of its own, so resending a request whose outcome is unknown cannot
        make a second job.
        """
        workflows = workflows or []
        size = 10 if self.options.quick else 50
        batches = [plans[i : i + size] for i in range(0, len(plans), size)]
        spread = span if workflow_span is None else workflow_span
        # One timeline: (seconds from the start, what to submit then), batches first on a tie.
        timeline: list[tuple[float, list[JobPlan] | WorkflowPlan]] = [
            (span * index / len(batches), batch) for index, batch in enumerate(batches)
        ]
        timeline += [
            (spread * index / len(workflows), workflow) for index, workflow in enumerate(workflows)
        ]
        timeline.sort(key=lambda entry: entry[0])
        start = time.monotonic()
        try:
            with Client(self.url, submitter="chaos") as client:
                for due, item in timeline:
                    if self.stop.wait(max(0.0, start + due - time.monotonic())):
                        break
                    if isinstance(item, WorkflowPlan):
                        self._submit_workflow(client, item)
                    else:
                        self._submit_batch(client, item)
        finally:  # whatever did not land is reported as such, whatever happened
            tokens = [plan.token for plan in plans]
            tokens += [job.token for workflow in workflows for job in workflow.jobs]
            self.unsubmitted = [token for token in tokens if token not in self.submitted]
            self.submitting_done.set()

    def _submit_workflow(self, client: Client, workflow: WorkflowPlan) -> None:
        """Submit ``workflow`` until it lands (or 2 minutes pass: it stays unsubmitted)."""
        sent = chaos_workflows.submit(
            client.store, workflow, self.ledger, QUEUE,
            give_up_after=120, stopped=self.stop.is_set, say=self.say,
        )  # fmt: skip
        self.workflows_resent += sent.resent
        self.workflow_submits += sent.requests
        self.submitted |= sent.ids

    def _submit_batch(self, client: Client, batch: list[JobPlan]) -> None:
        """Submit ``batch`` until it lands (for up to 2 minutes: then it stays unsubmitted)."""
        specs = [
            call_spec(
                "bench.chaos_jobs:work",
                (plan.token, plan.seconds, str(self.ledger)),
                queue=QUEUE,
                max_attempts=100,  # a long job may be hit many times
                timeout=60 + 3 * plan.seconds,
                idempotency_key=plan.token,
            )
            for plan in batch
        ]
        give_up = time.monotonic() + 120
        while True:
            try:
                handles = client.submit_many(specs)
            except errors.TaskqError as exc:
                if time.monotonic() > give_up or self.stop.is_set():
                    self.say(f"gave up submitting {len(batch)} jobs: {exc}")
                    return
                time.sleep(0.2)
                continue
            for plan, handle in zip(batch, handles, strict=True):
                self.submitted[plan.token] = handle.id
            return

    def watch(self) -> None:
        """Once a second: how many jobs have finished, and who runs which (for victims)."""
        with Client(self.url, submitter="chaos-watch") as client:
            while not self.stop.wait(1.0):
                try:
                    stats = [s for s in client.stats() if s.queue == QUEUE]
                    running = client.list(JobQuery(state=JobState.RUNNING, queue=QUEUE, limit=1000))
                    leaders = client.store.query(Statement(_MAINTAINER))
                except errors.TaskqError:
                    continue
                self.maintainer = str(leaders[0]["holder"]).rsplit("-", 1)[0] if leaders else ""
                self.finished = sum(
                    count for s in stats for st, count in s.counts.items() if st in FINISHED_STATES
                )
                self.running = [
                    (str(job.payload["args"][0]), (job.worker_id or "").rsplit("-", 1)[0])
                    for job in running
                ]
                counted = sum(s.counts.get(JobState.RUNNING, 0) for s in stats)
                self.most_running[self.phase] = max(self.most_running[self.phase], counted)

    def probe(self) -> None:
        """A small write every 50 ms, timed: what a submitter sees of the store."""
        with Client(self.url, submitter="chaos-probe") as client:
            n = 0
            while not self.stop.is_set():
                start = time.monotonic()
                try:
                    client.submit(
                        "bench.chaos_jobs:noop",
                        queue=PROBE_QUEUE,
                        idempotency_key=f"p{n}",
                        unchecked=True,
                    )
                    ok = True
                    n += 1
                except errors.TaskqError:
                    ok = False
                self.probes.append((start, time.monotonic(), ok))
                self.stop.wait(max(0.0, start + PROBE_INTERVAL - time.monotonic()))
