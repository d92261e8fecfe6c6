"""Jobs queued in a pool child behind a running one: order, output, withdrawal, replacement."""

from __future__ import annotations

import gc
import os
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from taskq.broker.limits import Limits
from taskq.broker.worker_policy import Policy
from taskq.worker.sandbox import protocol
from taskq.worker.sandbox.child_process import ChildSetup
from taskq.worker.sandbox.json_value import JsonValue
from taskq.worker.sandbox.outcome import Status
from taskq.worker.sandbox.payloads import CallPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox
from taskq.worker.sandbox.stopping import StopRequest

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TEST_JOBS = JobPreparer(policy=Policy(modules=("tests.support",)))
LIMITS = Limits(memory_bytes=256 << 20, cpu_seconds=5, wall_seconds=10)


def request(payload: CallPayload, limits: Limits) -> protocol.JobRequest:
    prepared = TEST_JOBS.request(payload, limits)
    assert isinstance(prepared, protocol.JobRequest)
    return prepared


def call(function: str, *args: JsonValue) -> CallPayload:
    return CallPayload(f"tests.support.jobs:{function}", list(args))


@pytest.fixture
async def pool() -> AsyncIterator[PoolSandbox]:
    async with PoolSandbox(preparer=TEST_JOBS) as made:
        yield made


async def test_queued_jobs_run_in_order_in_one_child_each_with_its_own_output(
    pool: PoolSandbox,
) -> None:
    texts = [f"job {index} says " + "x" * index * 300 for index in range(8)]
    started = [await pool.start(request(call("say_and_return", text), LIMITS)) for text in texts]
    assert pool.can_queue()
    outcomes = [await pool.finish(job) for job in started]
    assert [outcome.status for outcome in outcomes] == [Status.SUCCEEDED] * len(texts)
    assert [outcome.result for outcome in outcomes] == texts
    assert [outcome.log_tail for outcome in outcomes] == [text + "\n" for text in texts]


async def test_a_withdrawn_job_never_runs_and_the_child_carries_on(
    pool: PoolSandbox, tmp_path: Path
) -> None:
    record = tmp_path / "ran"
    before = await pool.run(call("getpid"), LIMITS)
    running = await pool.start(request(call("sleep", 0.5), LIMITS))
    stop = StopRequest()
    withdrawn = await pool.start(
        request(call("append_line", str(record), "withdrawn"), LIMITS), cancel=stop
    )
    after = await pool.start(request(call("getpid"), LIMITS))
    stop.set()

    first = await pool.finish(running)
    second = await pool.finish(withdrawn)
    third = await pool.finish(after)

    assert first.status is Status.SUCCEEDED
    assert second.status is Status.CANCELLED
    assert second.error is not None
    assert "before it ran" in second.error["message"]
    assert not record.exists()
    assert third.result == before.result, "the child was replaced for a withdrawal"


async def test_a_queued_job_the_child_had_already_started_is_killed_when_stopped(
    pool: PoolSandbox, tmp_path: Path
) -> None:
    quick = await pool.start(request(call("say_and_return", "quick"), LIMITS))
    stop = StopRequest()
    started = tmp_path / "slow.pid"
    slow = await pool.start(
        request(call("record_pid_and_sleep", str(started), 30), LIMITS), cancel=stop
    )
    await anyio.sleep(0)  # one pass of the loop: the frames go out at its end
    # The loop does not run meanwhile (a blocking wait), so the worker still
    # thinks the slow job is waiting when the child has already started it.
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline, "the child never started the slow job"
        time.sleep(0.01)
    stop.set()

    assert (await pool.finish(quick)).status is Status.SUCCEEDED
    stopped = await pool.finish(slow)
    assert stopped.status is Status.CANCELLED
    assert stopped.error is not None
    assert "before it ran" not in stopped.error["message"]
    assert stopped.wall_seconds < 10


async def test_jobs_queued_behind_a_timed_out_job_run_once_in_a_fresh_child(
    pool: PoolSandbox, tmp_path: Path
) -> None:
    record = tmp_path / "ran"
    doomed = await pool.start(request(call("sleep_and_identify", 30), Limits(wall_seconds=0.5)))
    queued = [
        await pool.start(request(call("append_line", str(record), f"job {index}"), LIMITS))
        for index in range(3)
    ]
    timed_out = await pool.finish(doomed)
    outcomes = [await pool.finish(job) for job in queued]

    assert timed_out.status is Status.TIMEOUT
    assert [outcome.status for outcome in outcomes] == [Status.SUCCEEDED] * 3
    assert record.read_text().splitlines() == ["job 0", "job 1", "job 2"]
    assert len({outcome.result for outcome in outcomes}) == 1


async def test_jobs_queued_behind_one_that_ran_out_of_memory_run_in_a_fresh_child(
    pool: PoolSandbox,
) -> None:
    before = await pool.run(call("getpid"), LIMITS)
    hog = await pool.start(request(call("hog_memory"), LIMITS))
    queued = [await pool.start(request(call("getpid"), LIMITS)) for _ in range(2)]

    assert (await pool.finish(hog)).status is Status.MEMORY
    pids = [(await pool.finish(job)).result for job in queued]
    assert pids[0] == pids[1] != before.result


async def test_a_stopped_job_queued_behind_one_that_crashed_is_not_run_again(
    pool: PoolSandbox, tmp_path: Path
) -> None:
    record = tmp_path / "ran"
    crash = await pool.start(request(call("exit_hard", 3), LIMITS))
    stop = StopRequest()
    queued = await pool.start(
        request(call("append_line", str(record), "queued"), LIMITS), cancel=stop
    )
    stop.set()

    assert (await pool.finish(crash)).status is Status.CRASHED
    assert (await pool.finish(queued)).status is Status.CANCELLED
    assert not record.exists()


def test_the_splitter_finds_markers_however_the_reads_cut_them() -> None:
    token = "0123456789abcdef"
    stream = (
        b"before\x1e"
        + protocol.output_marker(token, 7)
        + b"seven \x1etaskq-job ffffffffffffffff 8\x1e"
        + protocol.output_marker(token, 12)
        + b"twelve\x1e"
    )
    for size in (1, 2, 5, 64):
        splitter = protocol.OutputSplitter(token)
        pieces: list[bytes | int] = []
        for offset in range(0, len(stream), size):
            pieces += splitter.feed(stream[offset : offset + size])
        pieces += splitter.feed(b"after")
        assert _joined(pieces) == [
            b"before\x1e",
            7,
            b"seven \x1etaskq-job ffffffffffffffff 8\x1e",
            12,
            b"twelve\x1eafter",
        ], size


def _joined(pieces: list[bytes | int]) -> list[bytes | int]:
    """Adjacent byte pieces run together: where reads cut the output does not matter."""
    joined: list[bytes | int] = []
    for piece in pieces:
        if isinstance(piece, bytes) and joined and isinstance(joined[-1], bytes):
            joined[-1] += piece
        elif piece != b"":
            joined.append(piece)
    return joined


async def test_a_finished_job_is_freed_at_once_not_left_in_a_reference_cycle(
    pool: PoolSandbox,
) -> None:
    # A busy worker finishes thousands of jobs a second: left to the cyclic
    # collector, their objects cost it more than their jobs' own work.
    gc.disable()
    try:
        started = await pool.start(request(call("getpid"), LIMITS), cancel=StopRequest())
        assert started.in_child is not None
        sent = weakref.ref(started.in_child[1])
        outcome = await pool.finish(started)
        del started
        # The child's output stays the last job's until the next one starts.
        await pool.run(call("getpid"), LIMITS)
        assert outcome.status is Status.SUCCEEDED
        assert sent() is None, "the job's objects outlived it in a reference cycle"
    finally:
        gc.enable()


async def test_a_job_sent_before_its_child_is_ready_is_timed_from_when_it_is(
    tmp_path: Path,
) -> None:
    # A child whose interpreter takes a second to start, as on a loaded machine.
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(1.0)\n")
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    setup = ChildSetup(env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    async with PoolSandbox(preparer=TEST_JOBS, setup=setup) as pool:
        sent_at = time.monotonic()
        outcome = await pool.run(call("getpid"), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert time.monotonic() - sent_at >= 1.0
    # The job ran as soon as the child was up: the start is not its run time.
    assert outcome.wall_seconds < 1.0


async def test_each_queued_jobs_last_progress_reaches_its_own_callback(
    pool: PoolSandbox, tmp_path: Path
) -> None:
    """Short jobs run back to back: one read may carry several jobs' last progress."""
    await pool.run(call("getpid"), LIMITS)  # the child is up and waiting
    heard: dict[int, list[tuple[float, str]]] = {index: [] for index in range(8)}
    started = [
        await pool.start(
            request(CallPayload("tests.support.last_words:progress_and_return", [index]), LIMITS),
            on_progress=lambda update, index=index: heard[index].append(
                (update.fraction, update.message)
            ),
        )
        for index in heard
    ]
    marker = tmp_path / "ran"
    last = await pool.start(request(call("append_line", str(marker), "last"), LIMITS))
    await anyio.sleep(0)  # the frames go out in this pass of the loop
    # Then hold the loop until the child has run them all, so that their
    # messages wait in the socket together and arrive in one read.
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    outcomes = [await pool.finish(job) for job in [*started, last]]
    assert [outcome.status for outcome in outcomes] == [Status.SUCCEEDED] * (len(heard) + 1)
    assert heard == {index: [(1.0, f"{index} lines read")] for index in heard}
