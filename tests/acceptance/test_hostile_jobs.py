"""Hostile payloads against the real ``taskq-worker``: each fails cleanly, the worker carries on.

One worker per test with one slot, so the ordinary job that follows the
hostile one runs in the same slot (in pool isolation: in the pool child that
replaced the one the hostile job broke). The worker's maximums come from
``TEST_MAX_LIMITS``: 512 MiB of address space, 5 CPU seconds, 10 s of wall
clock, 1 MiB of output, 1 MiB of result.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import taskq
from taskq.broker.limits import parse_limits
from taskq.broker.records import Execution, Job, JobState
from tests.support.worker_process import (
    TEST_MAX_LIMITS,
    WorkerFleet,
    WorkerProcess,
    process_gone,
    wait_until,
)

GIB = 1 << 30
JOBS = "tests.support.jobs"
PIDFILE = "<pidfile>"  # an argument replaced by a path of the test's own
LIMITS = parse_limits(TEST_MAX_LIMITS)


@dataclass(frozen=True)
class Seen:
    """What a check may look at once the hostile job has ended."""

    job: Job
    execution: Execution
    worker: WorkerProcess
    pidfile: Path
    isolation: str


def _peak_rss_within_the_limit(seen: Seen) -> None:
    peak = seen.execution.peak_rss_bytes
    assert peak is not None, seen.execution
    assert 0 < peak <= LIMITS.memory_bytes, f"peak RSS {peak} over {LIMITS.memory_bytes}"


def _log_tail_kept_and_bounded(seen: Seen) -> None:
    tail = seen.execution.log_tail or ""
    assert tail, "an output_limit attempt must keep the end of the job's output"
    # Decoding may turn a cut multi-byte character into U+FFFD: a few bytes of slack.
    assert len(tail.encode()) <= LIMITS.log_tail_bytes + 8, len(tail.encode())
    last_line = tail.rstrip("\n").rsplit("\n", 1)[-1]
    assert last_line.startswith("line "), repr(tail[-200:])


def _grandchild_gone(seen: Seen) -> None:
    assert wait_until(seen.pidfile.exists, 5), "the job never wrote its grandchild's pid"
    pid = int(seen.pidfile.read_text())
    assert wait_until(lambda: process_gone(pid), 3), (
        f"grandchild {pid} of job {seen.job.id} ({seen.isolation}) outlived its job"
    )


def _opened_fewer_than_64(seen: Seen) -> None:
    # The job's own stdin, stdout, stderr and sockets count too.
    assert isinstance(seen.job.result, int), seen.job.result
    assert 0 < seen.job.result < 64, seen.job.result


@dataclass(frozen=True)
class Hostile:
    target: str
    args: tuple[Any, ...]
    outcome: str
    state: JobState
    error_words: tuple[str, ...] = ()  # one must appear in the error's type or message
    options: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 1
    signal: int | None = None
    exit_code: int | None = None
    check: Callable[[Seen], None] | None = None


CASES: dict[str, Hostile] = {
    "allocate_4gb": Hostile(
        "allocate", (4 * GIB,), "memory", JobState.DEAD, ("memory",),
        check=_peak_rss_within_the_limit,
    ),
    "spin_forever": Hostile(
        # The job's own limit (1 s) under the worker's (5 s), to keep the test short.
        "spin", (), "cpu", JobState.DEAD, ("cpu",), options={"limits": {"cpu_seconds": 1}},
    ),
    "sleep_forever": Hostile(
        "sleep", (3600,), "timeout", JobState.DEAD, ("wall-clock",), options={"timeout": 1}
    ),
    "print_1gb": Hostile(
        "print_bytes", (GIB,), "output_limit", JobState.DEAD, ("output",),
        check=_log_tail_kept_and_bounded,
    ),
    "grandchild_outlives_timeout": Hostile(
        "write_grandchild_pid_and_sleep", (PIDFILE, 3600), "timeout", JobState.DEAD,
        ("wall-clock",), options={"timeout": 1}, check=_grandchild_gone,
    ),
    "grandchild_outlives_return": Hostile(
        "write_grandchild_pid_and_sleep", (PIDFILE, 0), "succeeded", JobState.SUCCEEDED,
        check=_grandchild_gone,
    ),
    "segfault": Hostile(
        "dereference_null", (), "crashed", JobState.DEAD, ("SIGSEGV",), signal=signal.SIGSEGV
    ),
    "abort": Hostile("abort", (), "crashed", JobState.DEAD, ("SIGABRT",), signal=signal.SIGABRT),
    "exit_3": Hostile("exit_hard", (3,), "crashed", JobState.DEAD, ("status 3",), exit_code=3),
    # Not retryable: with attempts to spare the job still ends failed after one.
    "non_json_result": Hostile(
        "return_set", (), "result_invalid", JobState.FAILED, ("JSON",), max_attempts=2
    ),
    "100mb_result": Hostile(
        "big_result", (100_000_000,), "result_invalid", JobState.FAILED, ("limit",),
        max_attempts=2,
    ),
    # Each lifts its own limit first (to its hard limit, or unlimited where allowed).
    "lifts_its_cpu_limit": Hostile(
        "lift_cpu_limit_and_spin", (3600,), "cpu", JobState.DEAD, ("cpu",),
        options={"limits": {"cpu_seconds": 1}},
    ),
    "lifts_its_memory_limit": Hostile(
        "lift_memory_limit_and_allocate", (400 << 20,), "memory", JobState.DEAD, ("memory",),
        options={"limits": {"memory_bytes": "128MiB"}},
    ),
    "lifts_its_open_files_limit": Hostile(
        "lift_open_files_limit_and_open", (4096,), "succeeded", JobState.SUCCEEDED,
        options={"limits": {"open_files": 64}}, check=_opened_fewer_than_64,
    ),
    "ignores_sigterm": Hostile(
        "ignore_sigterm_and_sleep", (3600,), "timeout", JobState.DEAD, ("wall-clock",),
        options={"timeout": 1},
    ),
}  # fmt: skip


def _params() -> list[Any]:
    params = []
    for isolation in ("pool", "process"):
        for name, case in CASES.items():
            params.append(pytest.param(case, isolation, id=f"{isolation}-{name}"))
    return params


@pytest.mark.parametrize(("case", "isolation"), _params())
def test_a_hostile_job_ends_cleanly_and_the_same_worker_runs_the_next(
    case: Hostile,
    isolation: str,
    workers: WorkerFleet,
    client: taskq.Client,
    store_url: str,
    tmp_path: Path,
) -> None:
    worker = workers.start(store_url, worker={"isolation": isolation})
    pidfile = tmp_path / "grandchild.pid"
    args = [str(pidfile) if arg == PIDFILE else arg for arg in case.args]

    handle = client.submit(
        f"{JOBS}:{case.target}",
        *args,
        max_attempts=case.max_attempts,
        **case.options,
        unchecked=True,
    )
    job = client.wait(handle.id, timeout=30)
    executions = client.executions(handle.id)
    context = f"{job}\n{executions}\n{worker.describe()}"
    assert job.state is case.state, context
    assert job.attempts == 1, context
    [execution] = executions
    assert execution.outcome == case.outcome, context
    assert execution.worker_id == worker.worker_id, context
    if case.signal is not None:
        assert execution.signal == case.signal, context
    if case.exit_code is not None:
        assert execution.exit_code == case.exit_code, context
    if case.error_words:
        assert job.error is not None, context
        assert job.error.get("status") == case.outcome, context
        assert str(job.error.get("message", "")).strip(), f"an error with no message: {context}"
        said = f"{job.error.get('type')}: {job.error.get('message')}".lower()
        assert any(word.lower() in said for word in case.error_words), context
        assert execution.error == job.error, context
    finished = worker.wait_for_event("job_finished", job=handle.id)
    assert finished["status"] == case.outcome, context

    # The same process, still running, takes the next job in the same slot.
    assert worker.running, context
    follow = client.submit(f"{JOBS}:add", 2, 3, max_attempts=1, unchecked=True)
    assert follow.result(timeout=20) == 5, worker.describe()
    [follow_execution] = client.executions(follow.id)
    assert follow_execution.worker_id == worker.worker_id, worker.describe()
    assert worker.running, worker.describe()

    if case.check is not None:
        case.check(Seen(job, execution, worker, pidfile, isolation))
