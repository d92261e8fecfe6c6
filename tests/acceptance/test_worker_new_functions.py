"""A function added to a module while a pool worker runs: its job fails for good, saying the
worker imported the module when it started and picks up new functions only when restarted."""

from __future__ import annotations

import os
from pathlib import Path

import taskq
from taskq.broker.records import JobState
from tests.support.worker_process import REPO, WorkerFleet

WAIT_SECONDS = 60.0


def test_a_function_added_after_the_start_fails_its_job_once_telling_to_restart(
    tmp_path: Path, store_url: str, client: taskq.Client, workers: WorkerFleet
) -> None:
    user_code = tmp_path / "code"
    (user_code / "mylab").mkdir(parents=True)
    (user_code / "mylab" / "__init__.py").write_text("")
    tasks = user_code / "mylab" / "tasks.py"
    tasks.write_text("def add(a, b):\n    return a + b\n")
    workers.start(
        store_url,
        worker={"modules": ["mylab.tasks"]},
        extra_env={"PYTHONPATH": os.pathsep.join([str(user_code), str(REPO)])},
    )
    with tasks.open("a") as module:
        module.write("\n\ndef mul(a, b):\n    return a * b\n")

    handle = client.submit("mylab.tasks:mul", 2, 3, unchecked=True, max_attempts=3)
    job = client.wait(handle.id, timeout=WAIT_SECONDS)

    # Not retried: every attempt would find the module as the worker imported it.
    assert (job.state, job.attempts) == (JobState.FAILED, 1), job
    assert job.error is not None
    message = job.error["message"]
    assert message.startswith(
        "module 'mylab.tasks' has no attribute 'mul': the worker imported mylab.tasks when it "
        "started, at "
    ), message
    assert message.endswith(
        "and runs it as it was then; a worker picks up new or changed functions only when restarted"
    ), message
