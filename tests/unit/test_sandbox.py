"""The sandbox with real child processes, in both isolation modes where the mode matters."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from taskq.broker.limits import Limits
from taskq.broker.worker_policy import Policy
from taskq.job_context import JobUpdate
from taskq.worker.sandbox.child_process import ChildSetup
from taskq.worker.sandbox.environment import job_environment
from taskq.worker.sandbox.json_value import JsonValue
from taskq.worker.sandbox.lease_deadline import LeaseDeadline
from taskq.worker.sandbox.outcome import Status
from taskq.worker.sandbox.payloads import CallPayload, PythonExecPayload, ShellPayload
from taskq.worker.sandbox.preparation import JobPreparer
from taskq.worker.sandbox.sandboxes import PoolSandbox, Sandbox
from taskq.worker.sandbox.stopping import StopRequest
from tests.support.jobs import parent_of

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TEST_JOBS = Policy(modules=("tests.support",))
ENABLED = Policy(modules=("tests.support",), allow_python_exec=True, allow_shell=True)
LIMITS = Limits(memory_bytes=256 << 20, cpu_seconds=1, wall_seconds=10)
COUNT_WORDS = "def count_words(text):\n    return len(text.split())\n"


def call(function: str, *args: JsonValue) -> CallPayload:
    return CallPayload(f"tests.support.jobs:{function}", list(args))


@pytest.fixture(params=["process", "pool"])
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    made: Sandbox
    if request.param == "process":
        made = Sandbox(preparer=JobPreparer(policy=ENABLED))
    else:
        made = PoolSandbox(preparer=JobPreparer(policy=ENABLED))
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
async def pool() -> AsyncIterator[PoolSandbox]:
    async with PoolSandbox(preparer=JobPreparer(policy=ENABLED), max_jobs_per_child=3) as made:
        yield made


def wait_until_gone(pid: int) -> bool:
    """Whether ``pid`` is dead (gone, or a zombie awaiting its reaper) within ten seconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # reaped before, or while, it is read
            return True
        if state == "Z":
            return True
        time.sleep(0.01)
    return False


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_call_returns_its_value_and_usage(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("add", 2, 3), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.result == 5
    assert outcome.error is None
    assert outcome.peak_rss_bytes > 1 << 20
    assert outcome.cpu_seconds > 0
    assert 0 < outcome.wall_seconds < 10


async def test_exception_is_captured_with_its_traceback(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("fail", "boom"), LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.error is not None
    assert outcome.error["type"] == "tests.support.jobs.JobFailed"
    assert outcome.error["message"] == "boom"
    assert "in fail" in outcome.error["traceback"]
    assert "raise JobFailed(message)" in outcome.error["traceback"]


async def test_a_traceback_starts_at_the_jobs_own_first_frame(sandbox: Sandbox) -> None:
    """The runner's frames (the child's, ``@taskq.job``'s) go; taskq's after the job's stay."""
    payload = CallPayload("tests.support.last_words:declared_bad_progress")
    outcome = await sandbox.run(payload, LIMITS)
    assert outcome.error is not None
    traceback = outcome.error["traceback"]
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith("File ")]
    assert frames[0].endswith("in declared_bad_progress"), traceback
    assert "job_context.py" in frames[-1], traceback
    assert "sandbox" not in traceback, traceback
    assert "declared.py" not in traceback, traceback


async def test_missing_target_is_an_error(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(CallPayload("tests.support.jobs:no_such_job"), LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.error is not None
    assert outcome.error["type"] == "AttributeError"
    # Nothing of the job ran: its traceback is the error's line alone.
    assert outcome.error["traceback"] == (
        "AttributeError: module 'tests.support.jobs' has no attribute 'no_such_job'\n"
    )


async def test_python_exec_runs_the_named_function(sandbox: Sandbox) -> None:
    payload = PythonExecPayload(COUNT_WORDS, "count_words", ["hello world"])
    outcome = await sandbox.run(payload, LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.result == 2


async def test_python_exec_traceback_shows_the_source_line(sandbox: Sandbox) -> None:
    payload = PythonExecPayload("def divide(a, b):\n    return a / b\n", "divide", [1, 0])
    outcome = await sandbox.run(payload, LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.error is not None
    assert outcome.error["type"] == "ZeroDivisionError"
    assert "return a / b" in outcome.error["traceback"]


@pytest.mark.parametrize("sandbox_class", [Sandbox, PoolSandbox])
async def test_disabled_python_exec_never_runs(
    sandbox_class: type[Sandbox], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()\n{COUNT_WORDS}"
    payload = PythonExecPayload(code, "count_words", ["a b"])
    async with sandbox_class(preparer=JobPreparer(policy=TEST_JOBS)) as disabled:
        outcome = await disabled.run(payload, LIMITS)
    assert outcome.status is Status.POLICY
    assert outcome.error is not None
    assert "python_exec payloads are disabled" in outcome.error["message"]
    assert not marker.exists()
    # The same payload, enabled, does leave the marker: the check above can see it.
    async with sandbox_class(preparer=JobPreparer(policy=ENABLED)) as enabled:
        assert (await enabled.run(payload, LIMITS)).status is Status.SUCCEEDED
    assert marker.exists()


@pytest.mark.parametrize("sandbox_class", [Sandbox, PoolSandbox])
async def test_disabled_shell_never_runs(sandbox_class: type[Sandbox], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    async with sandbox_class(
        preparer=JobPreparer(policy=Policy(allow_python_exec=True))
    ) as sandbox:
        outcome = await sandbox.run(ShellPayload(["touch", str(marker)]), LIMITS)
    assert outcome.status is Status.POLICY
    assert not marker.exists()


async def test_shell_runs_in_cwd_with_env_and_captures_output(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    payload = ShellPayload(
        ["sh", "-c", 'pwd; echo "$GREETING" >&2'], cwd=str(tmp_path), env={"GREETING": "hello"}
    )
    outcome = await sandbox.run(payload, LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.exit_code == 0
    assert outcome.log_tail == f"{tmp_path}\nhello\n"


async def test_a_shell_commands_result_is_its_exit_code_and_stdout(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(ShellPayload(["sh", "-c", "echo out; echo err >&2"]), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.result == {"exit_code": 0, "stdout": "out\n", "stdout_truncated": False}
    assert outcome.log_tail == "out\nerr\n"


async def test_shell_commands_get_default_signal_handling(sandbox: Sandbox) -> None:
    # With SIGPIPE left ignored, `yes` would complain of a broken pipe instead of dying.
    outcome = await sandbox.run(ShellPayload(["sh", "-c", "yes | head -n 1"]), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.log_tail == "y\n"


async def test_shell_non_zero_exit_is_an_error(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(ShellPayload(["sh", "-c", "exit 4"]), LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.exit_code == 4


async def test_shell_missing_command_is_an_error_not_worth_a_retry(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(ShellPayload(["no-such-command-taskq"]), LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.error is not None
    assert outcome.error["type"] == "FileNotFoundError"
    assert outcome.error["message"] == (
        "cannot run 'no-such-command-taskq': No such file or directory"
    )
    assert outcome.give_up == "permanent"
    assert outcome.exit_code == 127


async def test_a_missing_working_directory_is_named_and_not_worth_a_retry(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    missing = tmp_path / "not-here"
    outcome = await sandbox.run(ShellPayload(["sh", "-c", "pwd"], cwd=str(missing)), LIMITS)
    assert outcome.status is Status.ERROR
    assert outcome.error is not None
    # The directory is to blame, not the shell the command would have run in.
    assert outcome.error["message"] == (
        f"cannot run in the directory {str(missing)!r}: No such file or directory"
    )
    assert outcome.give_up == "permanent"


async def test_memory_hog_hits_the_memory_limit(sandbox: Sandbox) -> None:
    # Room to spare on the CPU and the clock: on a loaded machine the page faults
    # of 256 MiB once took more than LIMITS' 1 s of CPU, which stopped the hog first.
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=20, wall_seconds=30)
    outcome = await sandbox.run(call("hog_memory"), limits)
    assert outcome.status is Status.MEMORY
    assert outcome.error is not None
    assert outcome.error["type"] == "MemoryError"
    assert outcome.peak_rss_bytes > (128 << 20)


async def test_cpu_spin_hits_the_cpu_limit(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("spin"), LIMITS)
    assert outcome.status is Status.CPU
    assert outcome.signal == signal.SIGXCPU
    # rusage samples CPU time more coarsely than the limit counts it: no exact bound.
    assert outcome.cpu_seconds > 0.5


async def test_sleep_past_the_wall_clock_times_out(sandbox: Sandbox) -> None:
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=1, wall_seconds=0.5)
    outcome = await sandbox.run(call("sleep", 30), limits)
    assert outcome.status is Status.TIMEOUT
    assert outcome.signal == signal.SIGKILL
    assert 0.5 <= outcome.wall_seconds < 5


async def test_job_limits_are_lowered_to_the_worker_maximum() -> None:
    async with Sandbox(
        preparer=JobPreparer(policy=TEST_JOBS, worker_max=Limits(wall_seconds=0.5))
    ) as sandbox:
        outcome = await sandbox.run(call("sleep", 30), LIMITS)
    assert outcome.status is Status.TIMEOUT
    assert outcome.wall_seconds < 5


async def test_timeout_kills_the_jobs_grandchildren(sandbox: Sandbox) -> None:
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=1, wall_seconds=1.5)
    outcome = await sandbox.run(call("spawn_grandchild_and_sleep", 30), limits)
    assert outcome.status is Status.TIMEOUT
    grandchild = int(outcome.log_tail.split("grandchild=")[1].split()[0])
    assert wait_until_gone(grandchild)


async def test_runaway_output_is_stopped_and_its_tail_kept(sandbox: Sandbox) -> None:
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=5, log_tail_bytes=1000, output_bytes=64_000)
    outcome = await sandbox.run(call("flood_output"), limits)
    assert outcome.status is Status.OUTPUT_LIMIT
    assert 900 <= len(outcome.log_tail) <= 1000
    # The tail is the latest output: whole lines that follow one another, past the cap.
    numbers = [int(line.split()[1]) for line in outcome.log_tail.split("\n")[1:-1]]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert numbers[-1] * len("line 0000000\n") > 64_000


async def test_a_job_on_the_default_limits_may_print_many_megabytes(sandbox: Sandbox) -> None:
    # The default output_bytes (1 GiB) is a guard against floods, not a cap on a long log.
    assert Limits().output_bytes == 1 << 30
    outcome = await sandbox.run(call("print_bytes", 16 << 20), LIMITS)
    assert outcome.status is Status.SUCCEEDED, outcome
    assert outcome.result >= 16 << 20
    assert len(outcome.log_tail) <= LIMITS.log_tail_bytes


async def test_result_that_is_not_json_is_invalid(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("return_set"), LIMITS)
    assert outcome.status is Status.RESULT_INVALID
    assert outcome.error is not None
    assert "not JSON-serialisable" in outcome.error["message"]
    assert outcome.result is None


async def test_result_over_the_size_limit_is_invalid(sandbox: Sandbox) -> None:
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=1, result_bytes=1000)
    outcome = await sandbox.run(call("return_text", 2000), limits)
    assert outcome.status is Status.RESULT_INVALID
    assert outcome.error is not None
    assert "over the limit of 1000" in outcome.error["message"]


async def test_hard_exit_is_a_crash_with_its_exit_code(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("exit_hard", 3), LIMITS)
    assert outcome.status is Status.CRASHED
    assert outcome.exit_code == 3
    assert outcome.signal is None


async def test_segfault_is_a_crash_with_its_signal(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("segfault"), LIMITS)
    assert outcome.status is Status.CRASHED
    assert outcome.signal == signal.SIGSEGV
    assert outcome.exit_code is None


def _raise_own_peak_rss(nbytes: int) -> None:
    """Touch ``nbytes`` of fresh memory, so this process's peak RSS is at least that."""
    block = bytearray(nbytes)
    block[::4096] = b"\x01" * len(range(0, nbytes, 4096))
    del block


async def test_a_crash_is_not_blamed_on_the_memory_the_worker_once_used(
    sandbox: Sandbox,
) -> None:
    # A child's ru_maxrss starts from its parent's peak: a worker that once
    # used most of a job's memory limit must not make its jobs' crashes look
    # like running out of memory, nor their peaks look like its own.
    _raise_own_peak_rss(LIMITS.memory_bytes)
    crashed = await sandbox.run(call("segfault"), LIMITS)
    small = await sandbox.run(call("add", 2, 3), LIMITS)
    assert crashed.status is Status.CRASHED
    assert crashed.peak_rss_bytes < LIMITS.memory_bytes // 2
    assert small.status is Status.SUCCEEDED
    assert 0 < small.peak_rss_bytes < LIMITS.memory_bytes // 2


async def test_progress_reaches_the_callback(sandbox: Sandbox) -> None:
    seen: list[JobUpdate] = []
    outcome = await sandbox.run(call("report_progress"), LIMITS, on_progress=seen.append)
    assert outcome.status is Status.SUCCEEDED
    assert seen == [JobUpdate(0.5, "halfway")]


async def test_cancel_kills_the_running_job_and_its_group(sandbox: Sandbox) -> None:
    cancel = StopRequest()
    groups: list[int] = []

    def on_progress(report: JobUpdate) -> None:
        groups.append(int(report.message.removeprefix("pgid=")))
        cancel.set()

    outcome = await sandbox.run(
        call("report_and_sleep", 30), LIMITS, cancel=cancel, on_progress=on_progress
    )
    assert outcome.status is Status.CANCELLED
    assert outcome.wall_seconds < 5
    assert not group_exists(groups[0])


async def test_cancelling_the_caller_kills_the_job(sandbox: Sandbox) -> None:
    groups: list[int] = []
    with anyio.CancelScope() as scope:

        def on_progress(report: JobUpdate) -> None:
            groups.append(int(report.message.removeprefix("pgid=")))
            scope.cancel()

        await sandbox.run(call("report_and_sleep", 30), LIMITS, on_progress=on_progress)
    assert scope.cancelled_caught
    assert not group_exists(groups[0])


async def test_a_message_of_no_known_type_is_a_protocol_error(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("send_own_message", {"type": "bogus"}, 30), LIMITS)
    assert outcome.status is Status.CRASHED
    assert outcome.error is not None
    assert outcome.error["type"] == "ProtocolError"
    assert outcome.wall_seconds < 5


@pytest.mark.parametrize(
    "message", [{"type": "ready", "cpu_seconds": 0}, {"type": "withdrawn", "seq": 1}]
)
async def test_a_fresh_child_says_nothing_of_waiting_for_jobs(
    message: dict[str, JsonValue],
) -> None:
    # A pool child's ``ready`` starts its first job's clock again, and its
    # ``withdrawn`` hands a job back unrun; a one-job child says neither, so
    # its job cannot restart its wall clock or have itself run again.
    async with Sandbox(preparer=JobPreparer(policy=TEST_JOBS)) as sandbox:
        outcome = await sandbox.run(call("send_own_message", message, 30), LIMITS)
    assert outcome.status is Status.CRASHED
    assert outcome.error is not None
    assert outcome.error["type"] == "ProtocolError"


async def test_a_pool_job_that_says_ready_cannot_restart_its_wall_clock(
    pool: PoolSandbox,
) -> None:
    outcome = await pool.run(
        call("send_own_message", {"type": "ready", "cpu_seconds": 0}, 30), LIMITS
    )
    assert outcome.status is Status.CRASHED
    assert outcome.error is not None
    assert outcome.error["type"] == "ProtocolError"


async def test_a_pool_job_that_says_it_was_withdrawn_is_not_run_again_and_again(
    pool: PoolSandbox,
) -> None:
    # Its first pool child's first job is seq 1, and so is its second's: run a
    # third time, in a child of its own, the message is refused.
    outcome = await pool.run(call("send_own_message", {"type": "withdrawn", "seq": 1}, 30), LIMITS)
    assert outcome.status is Status.CRASHED
    assert outcome.error is not None
    assert outcome.error["type"] == "ProtocolError"


async def test_pool_reuses_its_child_and_replaces_it_after_a_crash(pool: PoolSandbox) -> None:
    first = await pool.run(call("getpid"), LIMITS)
    second = await pool.run(call("getpid"), LIMITS)
    assert first.result == second.result
    assert second.exit_code is None  # the child lives on

    crash = await pool.run(call("exit_hard", 3), LIMITS)
    assert crash.status is Status.CRASHED

    after_crash = await pool.run(call("getpid"), LIMITS)
    assert after_crash.status is Status.SUCCEEDED
    assert after_crash.result != first.result


async def test_pool_replaces_its_child_after_max_jobs_per_child_jobs(pool: PoolSandbox) -> None:
    pids = [(await pool.run(call("getpid"), LIMITS)).result for _ in range(4)]
    assert pids[0] == pids[1] == pids[2] != pids[3]


async def test_pool_replaces_its_child_after_a_timeout(pool: PoolSandbox) -> None:
    before = await pool.run(call("getpid"), LIMITS)
    limits = Limits(memory_bytes=256 << 20, cpu_seconds=1, wall_seconds=0.3)
    assert (await pool.run(call("sleep", 30), limits)).status is Status.TIMEOUT
    after = await pool.run(call("getpid"), LIMITS)
    assert after.status is Status.SUCCEEDED
    assert after.result != before.result


async def test_pool_gives_each_job_its_own_output_and_usage(pool: PoolSandbox) -> None:
    first = await pool.run(call("say_and_return", "first"), LIMITS)
    second = await pool.run(call("say_and_return", "second"), LIMITS)
    assert (first.log_tail, second.log_tail) == ("first\n", "second\n")
    assert second.cpu_seconds < 0.5  # not the child's start-up, nor the first job's


async def test_a_jobs_info_records_reach_its_output_once_in_a_plain_format(
    pool: PoolSandbox,
) -> None:
    first = await pool.run(call("log_info", "first record"), LIMITS)
    second = await pool.run(call("log_info", "second record"), LIMITS)
    assert first.result == second.result  # one child ran both: its setup is not repeated
    for outcome, message in ((first, "first record"), (second, "second record")):
        [line] = outcome.log_tail.splitlines()
        # "2025-01-31 12:00:00,123 INFO lab.job: first record"
        assert re.fullmatch(rf"\d{{4}}-\d\d-\d\d [\d:,]+ INFO lab\.job: {message}", line), line


async def test_a_job_that_configures_logging_itself_gets_its_own_format(
    sandbox: Sandbox,
) -> None:
    outcome = await sandbox.run(call("log_in_own_format", "hello"), LIMITS)
    assert outcome.status is Status.SUCCEEDED, outcome
    assert outcome.log_tail == "mine: hello\n"


async def test_a_pool_job_is_charged_the_cpu_of_the_processes_it_waited_for(
    pool: PoolSandbox,
) -> None:
    burning = await pool.run(call("burn_cpu_in_a_subprocess", 0.3), LIMITS)
    after = await pool.run(call("say_and_return", "after"), LIMITS)
    assert burning.status is Status.SUCCEEDED
    assert burning.cpu_seconds >= 0.3
    assert after.cpu_seconds < 0.1  # the job before it is not carried over


async def test_a_pool_childs_slow_imports_do_not_count_towards_its_first_jobs_cpu() -> None:
    # The job is sent while the child still imports: its CPU counts from the
    # child's ``ready``, for the keeper as for RLIMIT_CPU.
    heavy = "tests.support.burns_cpu_on_import"
    setup = ChildSetup(
        env=job_environment(os.environ), modules=(heavy,), import_path=tuple(sys.path)
    )
    async with PoolSandbox(preparer=JobPreparer(policy=TEST_JOBS), setup=setup) as pool:
        outcome = await pool.run(call("is_imported", heavy), LIMITS)
    assert outcome.status is Status.SUCCEEDED, outcome.error
    assert outcome.result_json == "true"


async def test_pool_keeps_its_child_after_an_exception(pool: PoolSandbox) -> None:
    before = await pool.run(call("getpid"), LIMITS)
    assert (await pool.run(call("fail", "boom"), LIMITS)).status is Status.ERROR
    assert (await pool.run(call("getpid"), LIMITS)).result == before.result


async def test_pool_replaces_a_child_whose_job_left_a_process_running(pool: PoolSandbox) -> None:
    before = await pool.run(call("getpid"), LIMITS)
    outcome = await pool.run(call("spawn_grandchild_and_sleep", 0), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    grandchild = int(outcome.log_tail.split("grandchild=")[1].split()[0])
    assert wait_until_gone(grandchild)  # killed with the child's process group
    after = await pool.run(call("getpid"), LIMITS)
    assert after.result != before.result


async def test_pool_does_not_blame_the_next_job_while_a_dead_jobs_keeper_lags(
    pool: PoolSandbox,
) -> None:
    """The job process died between jobs and its keeper has not exited yet (stopped
    here, slow under load): the channel's hang-up tells, and a fresh child runs the job."""
    first = await pool.run(call("getpid"), LIMITS)
    assert isinstance(first.result, int)
    keeper = int(Path(f"/proc/{first.result}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(keeper, signal.SIGSTOP)
    try:
        os.kill(first.result, signal.SIGKILL)
        assert wait_until_gone(first.result)
        second = await pool.run(call("getpid"), LIMITS)
    finally:
        with contextlib.suppress(ProcessLookupError):  # retiring the child killed it
            os.kill(keeper, signal.SIGCONT)
    assert second.status is Status.SUCCEEDED
    assert second.result != first.result


async def test_pool_does_not_blame_the_next_job_for_a_child_that_died_between_jobs(
    pool: PoolSandbox,
) -> None:
    first = await pool.run(call("getpid"), LIMITS)
    assert isinstance(first.result, int)
    os.kill(first.result, signal.SIGKILL)
    assert wait_until_gone(first.result)
    second = await pool.run(call("getpid"), LIMITS)
    assert second.status is Status.SUCCEEDED
    assert second.result != first.result


async def test_a_failing_progress_callback_kills_the_job_and_propagates(sandbox: Sandbox) -> None:
    groups: list[int] = []

    def on_progress(report: JobUpdate) -> None:
        groups.append(int(report.message.removeprefix("pgid=")))
        raise LookupError("the callback broke")

    with pytest.raises(LookupError, match="the callback broke"):
        await sandbox.run(call("report_and_sleep", 30), LIMITS, on_progress=on_progress)
    assert not group_exists(groups[0])


async def test_a_pool_jobs_hard_limits_are_its_own_and_a_roomier_job_gets_a_fresh_child(
    pool: PoolSandbox,
) -> None:
    roomy = Limits(memory_bytes=512 << 20, cpu_seconds=1, wall_seconds=10, open_files=200)
    tight = Limits(memory_bytes=256 << 20, cpu_seconds=1, wall_seconds=10, open_files=100)
    first = await pool.run(call("soft_limits"), tight)
    # Hard as well as soft: a job cannot lift the limits it was given.
    assert first.result == {"open_files": 100, "open_files_hard": 100, "memory_bytes": 256 << 20}
    # That child's hard limits cannot go back up: this one runs in a fresh child.
    roomier = await pool.run(call("soft_limits"), roomy)
    assert roomier.result == {"open_files": 200, "open_files_hard": 200, "memory_bytes": 512 << 20}


async def test_jobs_run_under_the_batch_scheduling_policy(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(call("scheduling_policy"), LIMITS)
    assert outcome.result == os.SCHED_BATCH


async def test_pool_warm_up_starts_the_child_before_the_first_job(pool: PoolSandbox) -> None:
    await pool.warm_up()
    # A child belongs to the thread that started it: look at every thread's.
    children = {
        pid
        for task in Path("/proc/self/task").iterdir()
        for pid in (task / "children").read_text().split()
    }
    outcome = await pool.run(call("getpid"), LIMITS)
    assert isinstance(outcome.result, int)
    # The job runs below the child's keeper, the process the worker started.
    assert str(parent_of(outcome.result)) in children


async def test_values_at_the_edges_of_json_come_back_exactly(sandbox: Sandbox) -> None:
    edges: JsonValue = {
        "huge": 2**100,
        "negative": -(2**70),
        "u64": 2**64 - 1,
        "float": 0.1,
        "text": "ünï \U0001f600",
        "nested": [[], {}, None, True],
    }
    outcome = await sandbox.run(call("echo", edges), LIMITS)
    assert outcome.status is Status.SUCCEEDED
    assert outcome.result == edges
    assert isinstance(outcome.result, dict)
    assert type(outcome.result["huge"]) is int


@pytest.mark.parametrize("sandbox_class", [Sandbox, PoolSandbox])
async def test_the_keeper_kills_a_job_whose_lease_deadline_passes(
    sandbox_class: type[Sandbox],
) -> None:
    deadline = LeaseDeadline(lease_seconds=3, margin_seconds=1)
    deadline.claimed(time.monotonic())  # renewed now: dead within 2 s unless renewed again
    setup = ChildSetup(env=job_environment(os.environ), deadline=deadline)
    async with sandbox_class(preparer=JobPreparer(policy=TEST_JOBS), setup=setup) as sandbox:
        outcome = await sandbox.run(call("sleep", 30), LIMITS)
        assert outcome.status is Status.LEASE_EXPIRED, outcome
        assert outcome.signal == signal.SIGKILL
        assert outcome.error is not None
        assert "lease could not be renewed" in outcome.error["message"]
        # Past the deadline, a job never starts.
        refused = await sandbox.run(call("add", 1, 2), LIMITS)
        assert refused.status is Status.LEASE_EXPIRED
        # Renewed, jobs run again.
        deadline.held_since(time.monotonic())
        assert (await sandbox.run(call("add", 1, 2), LIMITS)).result == 3
