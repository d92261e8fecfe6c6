"""Declared jobs for workflows: a fan-out, a fan-in over its parents' results, run-time spawns.

Run by real workers (``tests/acceptance/test_worker_workflows.py``) and
inline by ``taskq.testing`` (``tests/integration/test_workflow_testing.py``).
"""

from __future__ import annotations

from typing import Any

import taskq


@taskq.job(queue="flows")
def square(x: int) -> int:
    return x * x


@taskq.job(queue="flows")
def add(x: int, y: int = 0) -> int:
    return x + y


@taskq.job(queue="flows")
def total() -> dict[str, Any]:
    """The fan-in: the sum of its parents' results, and how many there were, in order."""
    count = 0
    summed = 0
    positions = []
    for parent in taskq.current_job().parent_results():
        count += 1
        summed += parent.result
        positions.append(parent.position)
    return {
        "sum": summed,
        "count": count,
        "in_order": positions == list(range(count)),
        "parent_count": taskq.current_job().parent_count,
    }


@taskq.job(queue="flows")
def plus_parent(y: int) -> int:
    """A chain's link: its one parent's result plus ``y``."""
    [parent] = taskq.current_job().parent_results()
    return int(parent.result) + y


@taskq.job(queue="flows", max_attempts=1)
def fail() -> None:
    raise ValueError("on purpose")


@taskq.job(queue="flows")
def outcomes() -> list[list[Any]]:
    """Each parent's state and error type, for a job that runs anyway."""
    return [
        [parent.state.value, (parent.error or {}).get("type")]
        for parent in taskq.current_job().parent_results()
    ]


def _squares_then_total(k: int) -> taskq.Flow:
    """``k`` squares and a total over them, on the running job's own queue."""
    queue = taskq.current_job().queue
    return square.options(queue=queue).map(range(k)).then(total.options(queue=queue))


@taskq.job(queue="flows")
def spawn_squares(k: int) -> str:
    """Sized at run time: spawns ``k`` squares and a total over them, in its own workflow."""
    taskq.current_job().spawn(_squares_then_total(k))
    return f"spawned {k}"


@taskq.job(queue="flows", max_attempts=2)
def spawn_then_fail(k: int) -> None:
    """Spawns, then fails its first attempt: only the second attempt's spawn is written."""
    taskq.current_job().spawn(_squares_then_total(k))
    if taskq.current_job().attempt == 1:
        raise RuntimeError("first attempt fails after spawning")


@taskq.job(queue="flows", max_attempts=4, timeout=60)
def cube(x: int) -> int:
    """Declared with attempts and a timeout of its own, for a spawn by name to take."""
    return x * x * x


@taskq.job(queue="flows", max_attempts=1)
def spawn_by_name(target: str, args: list[Any], options: dict[str, Any]) -> str:
    """Spawns a step of ``target`` by name, with ``options``, beside a declared square on
    the running job's own queue."""
    beside = square.options(queue=taskq.current_job().queue).step(2)
    taskq.current_job().spawn(taskq.group(beside, taskq.step(target, *args, **options)))
    return "spawned"


@taskq.job(queue="flows", max_attempts=3)
def spawn_refused_by_store(kind: str, other_job: int = 0) -> str:
    """Spawns what only the store can refuse: a step after a job no one ``submitted``, or
    one after ``other_job``, of another workflow."""
    after = [2**62] if kind == "submitted" else [other_job]
    taskq.current_job().spawn(square.options(queue=taskq.current_job().queue, after=after).step(3))
    return "spawned"


@taskq.job(queue="flows", max_attempts=3)
def spawn_mistake(kind: str) -> str:
    """Spawns as no attempt could: ``twice``, or ``cycle``, a flow whose steps wait on each
    other; ``caught`` catches the cycle's refusal and fails of its own accord instead."""
    job = taskq.current_job()
    if kind == "twice":
        job.spawn(square.step(1))
        job.spawn(square.step(2))
    first, second = square.step(1), square.step(2)
    try:
        job.spawn(first.then(second).then(first))
    except taskq.errors.InvalidJob:
        if kind == "caught":
            raise RuntimeError("a failure of the job's own, not the refusal") from None
        raise
    return "spawned"
