"""How soon a fan-in starts after its last parent ends, next to the plain pickup.

Part 3 of ``python -m bench.workflows`` (see its docstring). Two real
``taskq-worker`` processes serve the store:

* worker 1: the pickup queue, ``bench-wf-same``, ``bench-wf-parents``;
* worker 2: the pickup queue, ``bench-wf-same``, ``bench-wf-other``.

``same queue``: 50 parents and their fan-in in ``bench-wf-same``; the
worker that reports the last parent may claim the fan-in in that report's
own write. ``other worker``: the parents in ``bench-wf-parents`` (worker 1
only), the fan-in in ``bench-wf-other`` (worker 2 only), which must learn
of the release from the store while it sits idle. ``chain``: one parent and
its child in ``bench-wf-same``, the release without the 49 other reports
the workers handle as a wide fan-in's last parent ends: what the release
itself costs, beside the pickup. ``parents of real length``: the same
queue, each of the 50 parents sleeping 10 to 59 ms first, as a pipeline's
steps do work, so that they end at their own times rather than in one
burst of no-op jobs that holds both CPUs as the last one ends.

The delay is the fan-in's first line minus the latest of its parents' last
lines, each ``time.monotonic()`` read inside the job. On the embedded store
it is also counted from the write that ended the last parent (the store's
own end of the parent, which released the fan-in), beside the pickup's from
the write of its submit. Runs and pickups go in
interleaved blocks, so that the machine's load weighs on both alike.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import jobs_pythonpath, percentile, pool_children_idle, wait_until
from bench.end_to_end import pickup
from bench.stores import BenchStore
from taskq.broker.client.client import Client
from taskq.broker.client.flows import group, step
from taskq.dev.workers import WorkerFleet, WorkerProcess, environment_without

PARENTS = 50
PICKUP_QUEUE = "bench-wf-pickup"
SAME = "bench-wf-same"
PARENTS_ONLY = "bench-wf-parents"
OTHER = "bench-wf-other"
WORKER_QUEUES = (
    (PICKUP_QUEUE, SAME, PARENTS_ONLY),
    (PICKUP_QUEUE, SAME, OTHER),
)
# A pause before each run: the workers have finished the last one's jobs
# and sit idle, as they would when a pipeline's parents end at leisure.
GAP_SECONDS = 0.3


# The parents' lengths in the "real length" variant: 10 to 59 ms, spread
# evenly over the parents (37 is prime to 50, so every length occurs once).
def _parent_seconds(number: int) -> float:
    return (10 + number * 37 % 50) / 1000


PICKUP_SPACING = 0.020


@dataclass
class FanInRun:
    """One fan-in, in ms: the delay, and where it went by the store's own times.

    ``to_report``: from the last parent's end to the write of its report (that
    write's clock, which the release sets as the fan-in's ``run_at``; the
    parent's ``finished_at`` is the worker's measure of when its code ended);
    ``to_claim``: from there to the fan-in's claim (its ``claimed_at``), the
    same write when the reporting worker claims it; ``to_start``: from the
    claim to the fan-in's first line. The store's times are each write's
    clock tick at its start, to the millisecond below: a split, not a
    measure. ``to_claim + to_start`` is the delay counted from the write that
    ended the last parent, as a pickup's from the write of its submit.
    """

    delay: float
    to_report: float
    to_claim: float
    to_start: float


@dataclass
class FanInFigures:
    """The runs of each variant, and the plain pickups (ms) taken between them."""

    same_queue: list[FanInRun] = field(default_factory=list)
    other_worker: list[FanInRun] = field(default_factory=list)
    chain: list[FanInRun] = field(default_factory=list)
    real_length: list[FanInRun] = field(default_factory=list)
    pickup: list[float] = field(default_factory=list)
    pickup_from_write: list[float] = field(default_factory=list)

    def summary(self, *, store_times: bool) -> dict[str, Any]:
        """Each variant's delays; with ``store_times``, where they went by the store's clock too.

        Only where that clock reads finer than the delays: rqlite's has a grain
        of 1e-6 day (86 ms, see the broker's common.sql), the embedded store's
        a millisecond.
        """

        def stats(values: list[float]) -> dict[str, float | int]:
            return {
                "samples": len(values),
                "p50_ms": round(percentile(values, 0.50), 2),
                "p99_ms": round(percentile(values, 0.99), 2),
                "max_ms": round(max(values), 2) if values else float("nan"),
            }

        def variant(runs: list[FanInRun]) -> dict[str, Any]:
            split = {
                part: round(statistics.median(getattr(run, part) for run in runs), 2)
                for part in ("to_report", "to_claim", "to_start")
            }
            if not store_times:
                return stats([run.delay for run in runs])
            return {
                **stats([run.delay for run in runs]),
                "median_split_ms": split,
                "from_write": stats([run.to_claim + run.to_start for run in runs]),
            }

        pickup_from_write = {"from_write": stats(self.pickup_from_write)} if store_times else {}
        return {
            "pickup": {**stats(self.pickup), **pickup_from_write},
            "same_queue": variant(self.same_queue),
            "other_worker": variant(self.other_worker),
            "chain": variant(self.chain),
            "real_length": variant(self.real_length),
        }


def fan_in_delay(
    client: Client,
    parents_queue: str,
    fan_in_queue: str,
    parents: int = PARENTS,
    *,
    real_length: bool = False,
) -> FanInRun:
    """One workflow of ``parents`` parents and a fan-in, from the last parent's end to its start.

    ``real_length``: each parent sleeps :func:`_parent_seconds` before it ends.
    """
    # Plain functions of bench.jobs, which no worker declares: submitted unchecked.
    flow = group(
        *[
            step(
                "bench.jobs:ended_after",
                number,
                _parent_seconds(number),
                queue=parents_queue,
                unchecked=True,
            )
            if real_length
            else step("bench.jobs:ended", number, queue=parents_queue, unchecked=True)
            for number in range(parents)
        ]
    ).then(step("bench.jobs:began", "fan-in", queue=fan_in_queue, unchecked=True))
    handle = client.submit_workflow(flow, name="bench-fan-in")
    handles = handle.jobs()
    began_monotonic, began_wall = handles[-1].result(timeout=60.0)
    ended = [client.get(job.id) for job in handles[:-1]]
    last = max(ended, key=lambda job: float(job.result[0]))
    ended_monotonic, ended_wall = last.result
    fan_in_job = client.get(handles[-1].id)
    # The write that ended the last parent released the fan-in and set its
    # run_at to that write's clock tick (its finished_at is the worker's
    # measure of when the code ended, not when the store learned of it).
    reported = float(fan_in_job.run_at or math.nan)
    claimed = float(fan_in_job.claimed_at or math.nan)
    return FanInRun(
        delay=(began_monotonic - ended_monotonic) * 1000,
        to_report=(reported - ended_wall) * 1000,
        to_claim=(claimed - reported) * 1000,
        to_start=(began_wall - claimed) * 1000,
    )


def measure(
    store: BenchStore, root: Path, *, concurrency: int, runs: int, blocks: int
) -> FanInFigures:
    """``runs`` fan-ins of each variant and ``runs`` pickups, in ``blocks`` interleaved blocks."""
    figures = FanInFigures()
    env = {**environment_without("TASKQ_"), "PYTHONPATH": jobs_pythonpath()}
    root.mkdir(parents=True, exist_ok=True)
    config = root / "worker.toml"
    config.write_text('[worker]\nmodules = ["bench.jobs"]\n', encoding="utf-8")
    with WorkerFleet(root, env=env) as fleet, Client(store.url) as client:
        for index, queues in enumerate(WORKER_QUEUES):
            args = ["--queues", ",".join(queues), "--concurrency", str(concurrency)]
            args += ["--isolation", "pool", "--config", str(config), "--log-format", "json"]
            fleet.start(store.url, tag=f"fan-in-{index + 1}", args=args)
        for worker in fleet.workers:
            worker.wait_for_event("worker_started", timeout=30.0)
        _wait_for_idle_pools(fleet.workers, concurrency)
        # A first workflow warms the pools' children and the client's view of the workers.
        fan_in_delay(client, SAME, SAME)
        per_block = max(1, runs // blocks)
        for _ in range(blocks):
            picked = pickup(
                client,
                PICKUP_QUEUE,
                jobs=per_block,
                spacing=PICKUP_SPACING,
                idle_first=GAP_SECONDS,
                keep_latencies=True,
            )
            figures.pickup += picked["latencies_ms"]
            figures.pickup_from_write += picked["from_write_ms"]
            for _ in range(per_block):
                time.sleep(GAP_SECONDS)
                figures.same_queue.append(fan_in_delay(client, SAME, SAME))
                time.sleep(GAP_SECONDS)
                figures.other_worker.append(fan_in_delay(client, PARENTS_ONLY, OTHER))
                time.sleep(GAP_SECONDS)
                figures.chain.append(fan_in_delay(client, SAME, SAME, parents=1))
                time.sleep(GAP_SECONDS)
                figures.real_length.append(fan_in_delay(client, SAME, SAME, real_length=True))
    return figures


def _wait_for_idle_pools(workers: Sequence[WorkerProcess], slots: int) -> None:
    """Until each worker has a pool child for each of its ``slots``, none still starting.

    A worker starts one pool child at once and the others once its first
    report is written (``SlotSandboxes``). With rqlite's 16 slots a worker,
    30 interpreters importing at once held both cores for about a second,
    and the first pickups measured then took 0.3-0.7 s (traced).
    """
    idle = pool_children_idle([worker.pid for worker in workers], least_each=slots)
    wait_until(idle, 60.0, "the workers' pool children starting", interval=0.1)
