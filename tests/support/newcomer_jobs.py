"""Jobs written as a newcomer from Celery would write them: a chain link that expects its
parent's result as an argument, and spawns of values that are not flows.

Run inline by ``taskq.testing`` and in real sandbox children
(``tests/unit/test_workflow_newcomer.py``).
"""

from __future__ import annotations

import taskq
from tests.support.workflow_jobs import square


@taskq.job(queue="flows")
def train(data: int) -> int:
    """A Celery chain's link: it expects the result before it as its argument."""
    return data * 10


@taskq.job(queue="flows", max_attempts=3)
def spawn_not_a_flow(kind: str) -> str:
    """Spawns what a Celery habit would: ``list`` of steps, a ``generator`` of them, a map
    over ``one_path`` (a string, not a list of them), or ``nothing`` at all (None)."""
    job = taskq.current_job()
    if kind == "list":
        job.spawn([square.step(1), square.step(2)])  # type: ignore[arg-type]
    elif kind == "generator":
        job.spawn(square.step(n) for n in range(2))  # type: ignore[arg-type]
    elif kind == "one_path":
        job.spawn(square.map("12"))
    else:
        job.spawn(None)  # type: ignore[arg-type]
    return "spawned"
