"""A pool worker's start: one child starts with it, the others once its first report is written.

A worker whose first jobs are long writes no report for a while: its other
slots start their children after a short bound all the same, and run jobs
beside the first. A job claimed for a slot whose child is starting is that
slot's, not claimed ahead: it is not handed back however long the start takes.
"""

from __future__ import annotations

from pathlib import Path

import taskq
from tests.support.worker_process import WorkerFleet

JOBS = "tests.support.jobs"


def test_a_worker_whose_first_jobs_are_long_runs_them_side_by_side(
    workers: WorkerFleet, client: taskq.Client, store_url: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    # Each holds its slot until the gate opens: neither can report first.
    handles = [
        client.submit(f"{JOBS}:add_once_open", str(gate), number, 1, unchecked=True)
        for number in (1, 2)
    ]
    worker = workers.start(store_url, worker={"concurrency": 2, "isolation": "pool"})
    for handle in handles:
        worker.wait_for_event("job_started", job=handle.id)
    gate.touch()
    assert [client.wait(handle.id, timeout=30).result for handle in handles] == [2, 3]
    for handle in handles:
        assert [execution.outcome for execution in client.executions(handle.id)] == ["succeeded"]
