"""Jobs written as a newcomer from Celery would write them, and the jobs the page's
"Coming from Celery" table names (docs/workflows.md), to run its Python.

Run inline by ``taskq.testing`` and in real sandbox children
(``tests/unit/test_workflow_newcomer.py``).
"""

from __future__ import annotations

from typing import Any

import taskq
from tests.support.workflow_jobs import square


@taskq.job(queue="flows")
def train_on(data: int) -> int:
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


# The table's jobs: each link of a chain reads the one result before it.


@taskq.job(queue="flows")
def prepare(url: str) -> str:
    return f"prepared {url}"


@taskq.job(queue="flows")
def train() -> str:
    [parent] = taskq.current_job().parent_results()
    return f"trained on {parent.result}"


@taskq.job(queue="flows")
def evaluate() -> str:
    [parent] = taskq.current_job().parent_results()
    return f"evaluated {parent.result}"


@taskq.job(queue="flows")
def resize(path: str) -> str:
    return f"resized {path}"


@taskq.job(queue="flows")
def crop(path: str) -> str:
    return f"cropped {path}"


@taskq.job(queue="flows")
def build_index(out: str) -> list[Any]:
    return [out, *(parent.result for parent in taskq.current_job().parent_results())]


@taskq.job(queue="flows")
def report() -> list[list[Any]]:
    """Each parent's state, and what its error says (its keys), for a step run anyway."""
    return [
        [parent.state.value, sorted(parent.error or {})]
        for parent in taskq.current_job().parent_results()
    ]
