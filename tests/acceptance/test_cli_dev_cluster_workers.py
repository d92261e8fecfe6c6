"""The workers ``taskq dev cluster start --workers N`` starts take the queues it is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from taskq.dev.processes import runs_with, wait_until
from tests.support.cli_runs import taskq
from tests.support.rqlite_cluster import free_base, kill_still_running, recorded_processes

# Long enough for a worker to import its modules and register on a fresh cluster.
_REGISTER_TIMEOUT_SECONDS = 60.0


@pytest.mark.rqlite
@pytest.mark.timeout(180)
def test_the_started_workers_take_the_queues_of_queues(tmp_path: Path) -> None:
    directory = (tmp_path / "cluster").resolve()
    env = {"TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", "")}
    processes: dict[int, str] = {}
    try:
        started = taskq(
            "dev", "cluster", "start", "--dir", str(directory), "--nodes", "1",
            "--http-base", str(free_base(2)), "--workers", "1", "--queues", "default,texts",
            env=env,
        )  # fmt: skip
        processes |= recorded_processes(directory)
        assert started.code == 0, started.err
        url = started.out.strip().splitlines()[-1]
        registered: list[dict[str, object]] = []

        def worker_registered() -> bool:
            listed = taskq("workers", "--json", store=url, env=env)
            registered[:] = listed.json() if listed.code == 0 else []
            return bool(registered)

        assert wait_until(worker_registered, _REGISTER_TIMEOUT_SECONDS, interval=0.5), (
            directory / "worker1" / "worker.log"
        ).read_text()
        assert [(worker["name"], worker["queues"]) for worker in registered] == [
            ("worker1", ["default", "texts"])
        ]

        stopped = taskq("dev", "cluster", "stop", "--dir", str(directory), env=env)
        assert stopped.code == 0, stopped.err
        assert [pid for pid, marker in processes.items() if runs_with(pid, marker)] == []
    finally:
        processes |= recorded_processes(directory)
        taskq("dev", "cluster", "stop", "--dir", str(directory), env=env)
        kill_still_running(processes)
