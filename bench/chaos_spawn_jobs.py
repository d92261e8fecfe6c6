"""The chaos run's spawning job: it works as ``chaos_jobs.work`` does, then fans out at run time.

Workers import this module as ``bench.chaos_spawn_jobs`` beside
``bench.chaos_jobs`` (the chaos run names both in their ``modules``). It is
apart from that module because it imports taskq, for
``taskq.current_job().spawn``, and ``chaos_jobs`` imports nothing but the
standard library. The run's planner (``chaos_workflows``) imports it too, for
:func:`spawned_token` and :func:`job_options`, so that what a spawner spawns
and what the verdict expects of it are written once.

:func:`spawn_fan_in` leaves the ledger lines of a run of ``work`` (its
result is ``work``'s), then spawns ``work`` jobs, one per entry of
``children``, and a ``work`` fan-in over them. Their tokens come from the
spawner's (:func:`spawned_token`): every attempt of the spawner spawns the
same tokens, so a second set of spawned jobs in the store shows as a token
spawned twice, and the verdict can tell which attempt wrote each set by its
key (``spawn:<lease token>/<position>``). The first ``long_children`` of
them are long jobs, marked so in their tokens, for the faults to find.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import taskq
from bench import chaos_jobs

_TARGET = "bench.chaos_jobs:work"
# A long job's token begins with this mark (the faults look for long jobs by it): a
# spawned job's token has it when that job is long, whether or not its spawner is.
_LONG_MARK = "L"


def spawned_token(spawner: str, position: int, long: bool = False) -> str:
    """The token of the job at ``position`` of what ``spawner`` spawns: ``w006j00s04``,
    or ``Lw006j00s00`` for a long one."""
    return f"{_LONG_MARK if long else ''}{spawner.removeprefix(_LONG_MARK)}s{position:02d}"


def job_options(seconds: float) -> dict[str, Any]:
    """The options of a chaos workflow's job that works ``seconds``: as the plain jobs', many
    attempts (faults may hit a job many times) and a timeout well past its work."""
    return {"max_attempts": 100, "timeout": 60 + 3 * seconds}


def spawn_fan_in(
    token: str,
    seconds: float,
    ledger_dir: str,
    children: Sequence[float],
    fan_in: float,
    long_children: int = 0,
) -> dict[str, object]:
    """Work as ``chaos_jobs.work`` does, then spawn a ``work`` job per entry of ``children``
    (its seconds; the first ``long_children`` are long) and a ``work`` fan-in over them
    that works ``fan_in`` seconds.

    The spawn goes with this attempt's success: an attempt killed or fenced
    spawns nothing, and the one the store accepts spawns the jobs anew.
    """
    result = chaos_jobs.work(token, seconds, ledger_dir)
    queue = taskq.current_job().queue
    works = [
        _work_step(spawned_token(token, at, at < long_children), child, ledger_dir, queue)
        for at, child in enumerate(children)
    ]
    last = _work_step(spawned_token(token, len(children)), fan_in, ledger_dir, queue)
    taskq.current_job().spawn(taskq.group(*works).then(last))
    return result


def _work_step(token: str, seconds: float, ledger_dir: str, queue: str) -> taskq.Flow:
    # Unchecked: chaos_jobs.work is no declared job, so there is no declaration to resolve.
    return taskq.step(
        _TARGET, token, seconds, ledger_dir, queue=queue, unchecked=True, **job_options(seconds)
    )
