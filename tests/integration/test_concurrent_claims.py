"""Several OS processes claim from one queue at once: every job runs exactly once.

Four processes (``tests/support/claim_worker.py``) are released together and
race to claim and complete the jobs of one queue, on the SQLite file (one
machine, processes contending for its write lock) and on the shared rqlite
cluster (every claim ordered by the leader). No job may be claimed by two of
them, none may be claimed twice, and the store must hold exactly one
execution per job, by the process that claimed it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from taskq.broker.client.client import call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.records import Fenced, JobState
from taskq.broker.stores.store import Store
from tests.support.job_tables import execution_rows, job_rows
from tests.support.rqlite_cluster import REPO

PROCESSES = 4
JOBS = {"sqlite": 300, "rqlite": 150}
ENQUEUE_BATCH = 50
READY_TIMEOUT_SECONDS = 60.0
RUN_TIMEOUT_SECONDS = 90.0


def test_each_job_is_claimed_exactly_once(store: Store, tmp_path: Path) -> None:
    queue = f"race-{uuid.uuid4().hex}"
    job_count = JOBS[store.url.split(":", 1)[0]]
    specs = [call_spec("example.jobs:noop", [index], queue=queue) for index in range(job_count)]
    enqueued: list[int] = []
    for start in range(0, job_count, ENQUEUE_BATCH):
        batch = specs[start : start + ENQUEUE_BATCH]
        enqueued += plan.run(store, job_enqueue(batch))

    claims_by_worker = run_claiming_processes(store.url, queue, tmp_path)

    claims = [(worker, claim) for worker, claimed in claims_by_worker.items() for claim in claimed]
    print(
        "\njobs claimed per process: "
        + ", ".join(f"{worker}={len(claimed)}" for worker, claimed in claims_by_worker.items())
    )
    times_claimed = Counter(claim["job_id"] for _, claim in claims)
    assert set(times_claimed) == set(enqueued), "some job was never claimed"
    assert max(times_claimed.values()) == 1, "a job was claimed more than once"
    assert all(claim["attempt"] == 1 for _, claim in claims)
    assert all(claim["outcome"] == Fenced.ACCEPTED.value for _, claim in claims)
    assert len({claim["token"] for _, claim in claims}) == len(claims)

    claimer = {claim["job_id"]: (worker, claim["token"]) for worker, claim in claims}
    jobs = job_rows(store, queue)
    assert set(jobs) == set(enqueued)
    for job_id, row in jobs.items():
        worker, token = claimer[job_id]
        assert row["state"] == JobState.SUCCEEDED
        assert row["attempts"] == 1
        assert (row["worker_id"], row["lease_token"]) == (worker, token)
        assert json.loads(row["result"]) == {"by": worker}
    executions = execution_rows(store, queue)
    assert sorted(execution["job_id"] for execution in executions) == sorted(enqueued)
    for execution in executions:
        worker, token = claimer[execution["job_id"]]
        assert (execution["worker_id"], execution["lease_token"]) == (worker, token)
        assert (execution["attempt"], execution["outcome"]) == (1, "succeeded")


def run_claiming_processes(store_url: str, queue: str, root: Path) -> dict[str, list[Any]]:
    """Start the claimers, release them together, and collect what each claimed.

    Every process is killed by its pid on the way out, whatever happened.
    """
    go = root / "go"
    workers = [f"claimer-{index}" for index in range(PROCESSES)]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for worker in workers:
            processes[worker] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.claim_worker",
                    store_url,
                    queue,
                    worker,
                    str(root / f"{worker}.ready"),
                    str(go),
                    str(root / f"{worker}.json"),
                ],
                cwd=REPO,
                stderr=subprocess.PIPE,
            )
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not all((root / f"{worker}.ready").exists() for worker in workers):
            exited = {w: p.returncode for w, p in processes.items() if p.poll() is not None}
            assert not exited, f"claimers exited before starting: {describe(processes)}"
            assert time.monotonic() < deadline, "claimers did not start in time"
            time.sleep(0.01)
        go.touch()
        for worker, process in processes.items():
            try:
                process.wait(timeout=RUN_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"{worker} still claiming after {RUN_TIMEOUT_SECONDS:g} s"
                ) from None
        failed = {worker: p.returncode for worker, p in processes.items() if p.returncode != 0}
        assert not failed, f"claimers failed: {describe(processes)}"
        return {
            worker: json.loads((root / f"{worker}.json").read_text(encoding="utf-8"))
            for worker in workers
        }
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
            if process.stderr is not None:
                process.stderr.close()


def describe(processes: dict[str, subprocess.Popen[bytes]]) -> str:
    """Each finished process's exit code and the end of its stderr."""
    lines = []
    for worker, process in processes.items():
        if process.poll() is None or process.stderr is None:
            continue
        tail = process.stderr.read().decode(errors="replace").strip()[-1500:]
        lines.append(f"{worker} exited {process.returncode}:\n{tail}")
    return "\n".join(lines)
