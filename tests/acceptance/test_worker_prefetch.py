"""The real ``taskq-worker`` claiming short jobs ahead of its free slots.

Claimed-ahead jobs hold a lease and count as running in the store, but the
worker still runs only ``concurrency`` of them at once, and a drain hands
back the ones that have not started.
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

import taskq
from taskq.broker.records import JobState
from taskq.broker.stores.store import Statement
from tests.support.worker_process import WorkerFleet, WorkerProcess, wait_until

JOBS = "tests.support.jobs"


def _claimed_together(client: taskq.Client, job_ids: list[int]) -> int:
    """The most jobs one claim took, among the first attempts of ``job_ids``.

    A claim gives every job it takes a lease token made of the claim's own
    token and the job's id (``<claim>.<id>``): equal prefixes, one claim.
    Store times would not tell: two claims may fall within one tick.
    """
    rows = client.store.query(
        Statement(
            "SELECT lease_token FROM executions WHERE attempt = 1 "
            "AND job_id IN (SELECT value FROM json_each(:ids))",
            {"ids": json.dumps(job_ids)},
        )
    )
    assert len(rows) == len(job_ids), rows
    claims = Counter(str(row["lease_token"]).rpartition(".")[0] for row in rows)
    return max(claims.values())


def test_short_jobs_are_claimed_ahead_but_run_one_at_a_time(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url, worker={"concurrency": 1, "prefetch": 4})
    handles = client.submit_many([taskq.call_spec(f"{JOBS}:running_span") for _ in range(80)])
    spans = sorted(handle.result(timeout=60) for handle in handles)

    overlapping = [(a, b) for a, b in pairwise(spans) if b[0] < a[1]]
    assert not overlapping, f"jobs ran at the same time with concurrency 1: {overlapping[:3]}"
    # With one slot and no claiming ahead, every claim would take exactly one job.
    together = _claimed_together(client, [handle.id for handle in handles])
    assert 2 <= together <= 1 + 4, f"{together} jobs claimed in one go\n{worker.describe()}"


def test_without_prefetch_each_claim_fills_only_free_slots(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url, worker={"concurrency": 1, "prefetch": 0})
    handles = client.submit_many([taskq.call_spec(f"{JOBS}:running_span") for _ in range(30)])
    for handle in handles:
        handle.result(timeout=60)
    assert _claimed_together(client, [handle.id for handle in handles]) == 1


def _running(client: taskq.Client, handles: list[taskq.JobHandle]) -> list[int]:
    return [handle.id for handle in handles if client.get(handle.id).state is JobState.RUNNING]


def _gated_job_with_jobs_claimed_ahead(
    client: taskq.Client, worker: WorkerProcess, gate: Path
) -> tuple[taskq.JobHandle, list[int]]:
    """A job held running by ``gate``, and the ids of short jobs claimed ahead behind it.

    Whether the worker claims ahead follows its recent run and round times
    (taskq.worker.prefetch), which a loaded machine stretches: a batch it
    claimed none of is let through, and another one tried.
    """
    deadline = time.monotonic() + 90
    while True:
        # Short jobs first, so the worker has seen that jobs here are short.
        for handle in client.submit_many([taskq.call_spec(f"{JOBS}:running_span")] * 30):
            handle.result(timeout=60)
        gated, *waiting = client.submit_many(
            [taskq.call_spec(f"{JOBS}:wait_for_file", [str(gate), 120])]
            + [taskq.call_spec(f"{JOBS}:running_span") for _ in range(3)]
        )
        worker.wait_for_event("job_started", job=gated.id)
        if wait_until(functools.partial(_running, client, waiting), timeout=2):
            return gated, _running(client, waiting)
        assert time.monotonic() < deadline, f"nothing was claimed ahead\n{worker.describe()}"
        gate.touch()
        for handle in [gated, *waiting]:
            handle.result(timeout=60)
        gate.unlink()


def test_a_drain_hands_back_jobs_claimed_ahead_without_using_an_attempt(
    workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    worker = workers.start(store_url, worker={"concurrency": 1, "prefetch": 4, "grace_seconds": 60})
    gate = tmp_path / "gate"
    slow, claimed_ahead = _gated_job_with_jobs_claimed_ahead(client, worker, gate)

    worker.terminate()
    worker.wait_for_event("worker_draining")
    gate.touch()  # the running job may finish now, within its grace; the rest must not start
    assert worker.wait(60) == 0, worker.describe()

    assert client.get(slow.id).state is JobState.SUCCEEDED
    for job_id in claimed_ahead:
        job = client.get(job_id)
        context = f"{job}\n{client.executions(job_id)}\n{worker.describe()}"
        assert job.state is JobState.QUEUED, context
        assert job.attempts == 0, context
        [released] = client.executions(job_id)
        assert released.outcome == "released", context
        assert released.error is not None, context
        assert released.error["message"].startswith("handed back: the worker is draining"), context


def test_jobs_handed_to_a_pool_child_together_keep_their_own_output(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    workers.start(store_url, worker={"concurrency": 1, "prefetch": 8, "child_queue": 4})
    texts = [f"job {index} " + "x" * (index % 7) * 500 for index in range(120)]
    handles = client.submit_many(
        [taskq.call_spec(f"{JOBS}:say_and_return", [text]) for text in texts]
    )
    assert [handle.result(timeout=60) for handle in handles] == texts
    for handle, text in zip(handles, texts, strict=True):
        tails = [execution.log_tail for execution in client.executions(handle.id)]
        assert tails == [text + "\n"], handle.id
