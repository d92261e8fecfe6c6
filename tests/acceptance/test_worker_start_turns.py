"""A real worker starts while it holds its store's start turn, and gives it back once started.

The turns are lock files in the user's turn folder, here a folder of the
test's own (``XDG_RUNTIME_DIR``). The test takes every turn the worker's
machine has, as a worker started before it would (``taskq.worker.start_turns``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import taskq
from taskq.broker.records import JobState
from taskq.dev.processes import wait_until
from taskq.worker.start_turns import StartTurn
from tests.support.worker_process import WorkerFleet

pytestmark = pytest.mark.timeout(120)

# Far beyond any start: a take that gets no turn in this time means none was given back.
PATIENT = 60.0


def _take_every_turn(store_url: str) -> list[StartTurn]:
    cpus = len(os.sched_getaffinity(0))  # what the worker counts its turns from
    turns = []
    for _ in range(max(1, cpus // 2)):
        turn = StartTurn.take(store_url, longest_wait=PATIENT)
        assert turn.held
        turns.append(turn)
    return turns


def test_a_worker_waits_for_a_start_turn_then_gives_it_back_though_its_job_runs_on(
    tmp_path: Path, workers: WorkerFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    with taskq.Client(store_url) as client:
        job = client.submit("tests.support.jobs:sleep", 30, queue="turns", unchecked=True)
    held = _take_every_turn(store_url)
    worker = workers.start(
        store_url,
        worker={"queues": ["turns"]},
        extra_env={"XDG_RUNTIME_DIR": str(runtime)},
        wait_started=False,
    )
    # It waits up to a second for a turn: not started within a fraction of that.
    with pytest.raises(AssertionError, match="no worker_started"):
        worker.wait_for_event("worker_started", timeout=0.3)
    for turn in held:
        turn.give_back()
    worker.wait_for_event("worker_started", timeout=30.0)
    with taskq.Client(store_url) as client:
        assert wait_until(lambda: client.get(job.id).state is JobState.RUNNING, 30.0)
    # Its first report is half a minute away: the turn comes back without it.
    for turn in _take_every_turn(store_url):
        turn.give_back()
    assert worker.running
