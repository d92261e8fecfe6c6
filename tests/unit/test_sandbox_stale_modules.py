"""A function added to a module after a pool child imported it: the job's error says the
worker runs the module as it imported it, when, and that a restart picks the function up."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from taskq.broker.limits import Limits
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox.child_process import ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.outcome import Outcome, Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LIMITS = Limits(wall_seconds=20)
ADD = "def add(a, b):\n    return a + b\n"
MUL = "\n\ndef mul(a, b):\n    return a * b\n"
RESTART = (
    "and runs it as it was then; a worker picks up new or changed functions only when restarted"
)


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A folder on the children's import path holding the user's package ``lab``, whose
    ``__init__`` imports ``lab.tasks`` and not ``lab.other``."""
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "__init__.py").write_text("from lab import tasks\n")
    for name in ("tasks", "other"):
        (tmp_path / "lab" / f"{name}.py").write_text(ADD)
    return tmp_path


@pytest.fixture
async def pool(lab: Path) -> AsyncIterator[PoolSandbox]:
    """A pool as ``taskq-worker --modules lab`` has: its child imports lab as it starts."""
    import_path = [str(lab), *sys.path]
    setup = ChildSetup(
        env=job_environment(os.environ), modules=("lab",), import_path=tuple(import_path)
    )
    preparer = JobPreparer(policy=Policy(modules=("lab",)), import_path=import_path)
    async with PoolSandbox(preparer=preparer, setup=setup) as made:
        yield made


def refused_for_good(outcome: Outcome) -> str:
    """The message of ``outcome``: an error the job would meet on every attempt."""
    assert outcome.status is Status.ERROR, outcome
    assert outcome.give_up == "permanent", outcome
    assert outcome.error is not None
    assert outcome.error["type"] == "AttributeError"
    return str(outcome.error["message"])


async def test_a_function_added_since_the_worker_started_is_told_to_need_a_restart(
    pool: PoolSandbox, lab: Path
) -> None:
    before = time.time()
    started = await pool.run(CallPayload("lab.tasks:add", [2, 3]), LIMITS)
    assert started.status is Status.SUCCEEDED, started
    with (lab / "lab" / "tasks.py").open("a") as module:
        module.write(MUL)

    message = refused_for_good(await pool.run(CallPayload("lab.tasks:mul", [2, 3]), LIMITS))
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
    said = re.fullmatch(
        rf"module 'lab.tasks' has no attribute 'mul': the worker imported lab.tasks when it "
        rf"started, at ({stamp}), {RESTART}",
        message,
    )
    assert said is not None, message
    imported_at = time.mktime(time.strptime(said[1], "%Y-%m-%dT%H:%M:%S"))
    assert int(before) - 1 <= imported_at <= time.time(), message


async def test_a_module_a_job_imported_is_told_as_imported_for_an_earlier_job(
    pool: PoolSandbox, lab: Path
) -> None:
    first = await pool.run(CallPayload("lab.other:add", [2, 3]), LIMITS)
    assert first.status is Status.SUCCEEDED, first
    with (lab / "lab" / "other.py").open("a") as module:
        module.write(MUL)

    message = refused_for_good(await pool.run(CallPayload("lab.other:mul", [2, 3]), LIMITS))
    assert message == (
        "module 'lab.other' has no attribute 'mul': the worker imported lab.other for an "
        f"earlier job, {RESTART}"
    )
