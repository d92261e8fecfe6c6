"""Limits hold across processes: a queue's concurrency and rate, a submitter's rate."""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

from taskq import errors
from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.jobs import job_list
from taskq.broker.ops.queues import job_counts, queue_set_limits, submit_limit_set
from taskq.broker.records import JobState
from taskq.broker.stores.store import Consistency, Statement
from tests.support.processes import run_together, started_together
from tests.support.reports import completed, report_one

LIMIT = 3
PROCESSES = 4


def _work(url: str, queue: str, barrier: Any, out: Any) -> None:
    try:
        store = open_store(url)
        barrier.wait(timeout=60)
        done = 0
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 3:
            claimed = plan.run(
                store, job_claim(f"w{id(store)}", [queue], limit=2, lease_seconds=60)
            )
            if not claimed:
                time.sleep(0.005)
                continue
            idle_since = time.monotonic()
            time.sleep(random.uniform(0.005, 0.03))
            for job in claimed:
                plan.run(store, report_one(completed(job.lease, None)))
                done += 1
        store.close()
        out.put(done)
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_max_running_is_never_exceeded_by_several_workers(url: str) -> None:
    queue = f"limited-{uuid.uuid4().hex[:8]}"
    jobs = 120
    store = open_store(url)
    plan.run(store, job_enqueue([call_spec("m:f", queue=queue) for _ in range(jobs)]))
    plan.run(store, queue_set_limits(queue, max_running=LIMIT, create=True))
    sampled: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            [stats] = [s for s in plan.run(store, job_counts()) if s.queue == queue]
            sampled.append(stats.counts[JobState.RUNNING])

    sampler = threading.Thread(target=sample, daemon=True)
    with started_together(_work, (url, queue), PROCESSES) as collect:
        sampler.start()
        try:
            results = collect()
        finally:
            sampling.set()
            sampler.join(timeout=30)
    assert sum(results) == jobs
    assert sum(1 for result in results if result) > 1, "the work was not shared"
    assert max(sampled) <= LIMIT

    # The store's own record: at no instant did more than LIMIT attempts overlap.
    rows = store.query(
        Statement(
            "SELECT e.started_at AS start, e.finished_at AS end FROM executions AS e "
            "JOIN jobs AS j ON j.id = e.job_id WHERE j.queue = :queue",
            {"queue": queue},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    # A finish and a start at the same instant: the finish came first.
    events = sorted([(row["start"], 1) for row in rows] + [(row["end"], -1) for row in rows])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    assert len(rows) == jobs
    assert peak <= LIMIT
    store.close()


def _within_token_bucket(times: list[float], capacity: float, rate: float) -> bool:
    """No run of events exceeds a full bucket plus what refills while it lasts."""
    times = sorted(times)
    for first in range(len(times)):
        for last in range(first, len(times)):
            allowed = capacity + rate * (times[last] - times[first]) + 1e-6
            if last - first + 1 > allowed:
                return False
    return True


def test_a_queue_rate_holds_across_several_workers(url: str) -> None:
    queue = f"rated-{uuid.uuid4().hex[:8]}"
    rate, jobs = 20.0, 90
    store = open_store(url)
    plan.run(store, queue_set_limits(queue, rate_limit=rate, rate_period=1.0, create=True))
    plan.run(store, job_enqueue([call_spec("m:f", queue=queue) for _ in range(jobs)]))
    results = run_together(_work, (url, queue), PROCESSES)
    assert sum(results) == jobs
    rows = store.query(
        Statement(
            "SELECT e.started_at AS start FROM executions AS e "
            "JOIN jobs AS j ON j.id = e.job_id WHERE j.queue = :queue",
            {"queue": queue},
        ),
        consistency=Consistency.LINEARIZABLE,
    )
    starts = [float(row["start"]) for row in rows]
    assert len(starts) == jobs
    assert _within_token_bucket(starts, capacity=rate, rate=rate)
    # Not vacuous: the work took about as long as the rate makes it take.
    assert max(starts) - min(starts) >= (jobs - rate) / rate * 0.8
    store.close()


def _submit(url: str, submitter: str, queue: str, barrier: Any, out: Any) -> None:
    try:
        store = open_store(url)
        barrier.wait(timeout=60)
        accepted = refused = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            spec = call_spec("m:f", queue=queue, submitter=submitter)
            try:
                plan.run(store, job_enqueue([spec]))
                accepted += 1
            except errors.RateLimited as exc:
                refused += 1
                time.sleep(min(exc.retry_after or 0.05, 0.05))
        store.close()
        out.put((accepted, refused))
    except Exception as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_a_submitter_rate_holds_across_several_clients(url: str) -> None:
    queue = f"submitted-{uuid.uuid4().hex[:8]}"
    submitter = f"lab-{queue}"
    rate = 30.0
    store = open_store(url)
    plan.run(store, submit_limit_set(submitter, rate, 1.0))
    results = run_together(_submit, (url, submitter, queue), PROCESSES)
    assert sum(refused for _, refused in results) > 0, "the limit was never reached"
    jobs = plan.run(store, job_list(queue=queue, limit=1000))
    assert len(jobs) == sum(accepted for accepted, _ in results)
    assert _within_token_bucket([job.created_at for job in jobs], capacity=rate, rate=rate)
    store.close()
