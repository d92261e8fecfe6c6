"""A failed job's traceback, as its record keeps it: the job's own frames.

An exception that leaves a job has passed through the child that called it:
its traceback starts with frames of taskq's runner (and of the standard
library's machinery the runner calls through) before the job's first frame.
Those say nothing about the job and would be the same in every failure, so
they are dropped, in each exception of the chain. Frames after the job's
first one stay, whatever module they are in: a job that fails inside a
library, or inside taskq, is shown so.
"""

from __future__ import annotations

import traceback
from types import TracebackType

# The modules a job is called through: the child, ``@taskq.job``'s wrapper,
# the import of the job's module (``importlib``'s frozen bootstrap included),
# the event loop of an ``async def`` job, and the thread ``taskq.testing`` runs
# that loop in when its caller already has one.
_RUNNER_MODULES = (
    "taskq.worker.sandbox",
    "taskq.broker.client.declared",
    "importlib",
    "asyncio",
    "concurrent.futures",
)


def format_job_traceback(exc: BaseException) -> str:
    """``exc``'s traceback as Python prints it, without the runner's frames before the job's."""
    described = traceback.TracebackException.from_exception(exc)
    pending = [(described, exc)]
    while pending:
        summary, raised = pending.pop()
        skip = _runner_frames(raised.__traceback__)
        if skip:
            summary.stack = traceback.StackSummary.from_list(summary.stack[skip:])
        # The summary leaves out what it has shown already (a cycle): follow only what it has.
        if summary.__cause__ is not None and raised.__cause__ is not None:
            pending.append((summary.__cause__, raised.__cause__))
        if summary.__context__ is not None and raised.__context__ is not None:
            pending.append((summary.__context__, raised.__context__))
    return "".join(described.format())


def _runner_frames(tb: TracebackType | None) -> int:
    """How many frames at the start of ``tb`` are the runner's."""
    count = 0
    while tb is not None and _is_runner(tb.tb_frame.f_globals):
        count += 1
        tb = tb.tb_next
    return count


def _is_runner(module_globals: dict[str, object]) -> bool:
    module = module_globals.get("__name__")
    if module == "__main__":
        # The child runs as ``python -m``: its module's spec still has its name.
        module = getattr(module_globals.get("__spec__"), "name", module)
    return isinstance(module, str) and any(
        module == name or module.startswith(f"{name}.") for name in _RUNNER_MODULES
    )
