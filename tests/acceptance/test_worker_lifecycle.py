"""The real ``taskq-worker`` killed, paused, drained and misconfigured.

Workers run with 2 s leases renewed every 0.5 s (``TEST_WORKER_SETTINGS``).
The maintenance services (the requeue of expired leases among them) run in
whichever worker holds the store's maintenance leader lease, a 10 s lease
(``Maintainer.lease_seconds``) renewed every second.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_list
from taskq.broker.records import JobState, WorkerInfo
from taskq.worker.cpus import format_cpu_list
from tests.support.cli_runs import taskq as taskq_command
from tests.support.worker_process import (
    REPO,
    WorkerFleet,
    WorkerProcess,
    all_threads_stopped,
    freeze_between_writes,
    run_worker_to_its_end,
    wait_until,
    worker_environment,
    write_config,
    write_lock_is_free,
)

JOBS = "tests.support.jobs"


def _outcomes(client: taskq.Client, job_id: int) -> list[tuple[str | None, str]]:
    return [(execution.outcome, execution.worker_id) for execution in client.executions(job_id)]


def test_a_killed_workers_job_is_requeued_and_finished_by_another(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    """kill -9 mid-job: the lease lapses, the survivor requeues the job and runs it.

    The killed worker started first, so it held the maintenance leader lease:
    the survivor requeues only after that lease (10 s) lapses, which is most
    of this test's run time.
    """
    first = workers.start(store_url, tag="first")
    handle = client.submit(f"{JOBS}:sleep_and_identify", 3, max_attempts=3, unchecked=True)
    first.wait_for_event("job_started", job=handle.id)
    second = workers.start(store_url, tag="second")

    first.send_signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL

    job = client.wait(handle.id, timeout=45)
    context = f"{job}\n{client.executions(handle.id)}"
    assert job.state is JobState.SUCCEEDED, context
    assert job.result["worker"] == "second", context
    assert job.result["worker_pid"] == second.pid, context
    assert job.attempts == 2, context
    assert _outcomes(client, handle.id) == [
        ("lease_expired", first.worker_id),
        ("succeeded", second.worker_id),
    ], context
    assert first.worker_id != second.worker_id
    assert second.running


def test_a_paused_workers_late_result_is_refused(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    """SIGSTOP past the lease: another worker finishes the job; after SIGCONT the result drops.

    The paused worker runs without maintenance, so the other one leads from
    its start and requeues the job as soon as its lease lapses. It is frozen
    between its writes: one frozen inside a commit would hold the other's up.
    """
    first = workers.start(store_url, tag="first", worker={"maintenance": False})
    handle = client.submit(f"{JOBS}:sleep_and_identify", 4, max_attempts=3, unchecked=True)
    first.wait_for_event("job_started", job=handle.id)
    second = workers.start(store_url, tag="second")

    freeze_between_writes(first, Path(store_url.removeprefix("sqlite://")))
    try:
        job = client.wait(handle.id, timeout=30)
    finally:
        first.send_signal(signal.SIGCONT)
    # The paused worker's sandbox child was not paused: its result waits to be read.
    dropped = first.wait_for_event("job_dropped", job=handle.id, timeout=15)

    job = client.get(handle.id)
    context = f"{job}\n{client.executions(handle.id)}\ndropped: {dropped}"
    assert job.state is JobState.SUCCEEDED, context
    assert job.result == {"worker": "second", "worker_pid": second.pid}, context
    assert _outcomes(client, handle.id) == [
        ("lease_expired", first.worker_id),
        ("succeeded", second.worker_id),
    ], context
    assert not first.events("job_finished", job=handle.id), context
    assert first.running, first.describe()


def _succeeded(client: taskq.Client) -> int:
    return sum(queue.counts.get(JobState.SUCCEEDED, 0) for queue in client.stats())


def test_ctrl_z_stops_a_busy_worker_between_its_writes(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    """SIGTSTP, again and again, while the worker writes most of the time: never inside one.

    A worker stopped inside a write would hold the embedded store's write
    lock, and every other writer with it, until SIGCONT.
    """
    database = Path(store_url.removeprefix("sqlite://"))
    worker = workers.start(store_url)
    client.submit_many(f"{JOBS}:echo", [(i,) for i in range(20_000)], unchecked=True)
    for stop in range(20):
        done = _succeeded(client)
        progressed = wait_until(lambda done=done: _succeeded(client) > done, timeout=30)
        assert progressed, worker.describe()
        worker.send_signal(signal.SIGTSTP)
        try:
            stopped = wait_until(lambda: all_threads_stopped(worker.pid), timeout=10)
            assert stopped, f"stop {stop}: the worker did not stop on SIGTSTP"
            assert write_lock_is_free(database), f"stop {stop}: stopped inside a write"
        finally:
            worker.send_signal(signal.SIGCONT)
    assert worker.running, worker.describe()


def test_sigterm_finishes_jobs_within_grace_and_hands_back_the_rest(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    worker = workers.start(store_url, worker={"concurrency": 2, "grace_seconds": 5})
    quick = client.submit(f"{JOBS}:sleep_and_identify", 1.5, max_attempts=3, unchecked=True)
    # Ignoring SIGTERM changes nothing: the worker stops jobs with SIGKILL.
    slow = client.submit(f"{JOBS}:ignore_sigterm_and_sleep", 600, max_attempts=3, unchecked=True)
    worker.wait_for_event("job_started", job=quick.id)
    worker.wait_for_event("job_started", job=slow.id)

    worker.terminate()
    assert worker.wait(30) == 0, worker.describe()

    quick_job = client.get(quick.id)
    assert quick_job.state is JobState.SUCCEEDED, quick_job
    assert quick_job.result["worker"] == "w", quick_job
    assert _outcomes(client, quick.id) == [("succeeded", worker.worker_id)]
    slow_job = client.get(slow.id)
    context = f"{slow_job}\n{client.executions(slow.id)}\n{worker.describe()}"
    assert slow_job.state is JobState.QUEUED, context
    assert slow_job.attempts == 0, context
    assert _outcomes(client, slow.id) == [("released", worker.worker_id)], context
    # The run not counted says why it will run again.
    [released] = client.executions(slow.id)
    assert released.error is not None, context
    assert released.error["message"] == "handed back: the worker is draining; killed", context
    assert released.error["type"] == "HandedBack", context

    assert worker.wait_for_event("job_finished", job=quick.id)["stopped"] == ""
    handed_back = worker.wait_for_event("job_finished", job=slow.id)
    assert handed_back["stopped"] == "drain", handed_back
    assert handed_back["error"] == "handed back: the worker is draining; killed", handed_back
    worker.wait_for_event("worker_stopped")
    _assert_stopped(client, worker)


def test_a_second_sigterm_hands_back_running_jobs_at_once(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    # A grace far longer than the test may wait: only the second signal can end it.
    worker = workers.start(store_url, worker={"grace_seconds": 600})
    slow = client.submit(f"{JOBS}:ignore_sigterm_and_sleep", 600, max_attempts=3, unchecked=True)
    worker.wait_for_event("job_started", job=slow.id)

    worker.terminate()
    draining = worker.wait_for_event("worker_draining")
    # Said where a user who pressed Ctrl-C looks: how long, and how to stop sooner.
    assert (draining["running"], draining["grace_seconds"]) == (1, 600), draining
    assert "second Ctrl-C or SIGTERM" in draining["hint"], draining
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.describe()

    slow_job = client.get(slow.id)
    context = f"{slow_job}\n{client.executions(slow.id)}\n{worker.describe()}"
    assert slow_job.state is JobState.QUEUED, context
    assert slow_job.attempts == 0, context
    assert _outcomes(client, slow.id) == [("released", worker.worker_id)], context
    _assert_stopped(client, worker)


def test_a_draining_worker_is_draining_in_the_store_and_serves_no_queue_until_it_stops(
    workers: WorkerFleet, client: taskq.Client, store_url: str
) -> None:
    # A grace and a wall-clock limit far longer than the test may wait: it drains, its job
    # running, until the second signal.
    worker = workers.start(
        store_url, worker={"grace_seconds": 600}, max_limits={"wall_seconds": 600}
    )
    slow = client.submit(f"{JOBS}:ignore_sigterm_and_sleep", 600, max_attempts=3, unchecked=True)
    worker.wait_for_event("job_started", job=slow.id)
    assert _row(client, worker).state == "active"

    worker.terminate()
    worker.wait_for_event("worker_draining")
    assert wait_until(lambda: _row(client, worker).state == "draining", timeout=10), _row(
        client, worker
    )
    before = _row(client, worker).heartbeat_at
    # The queue's only worker drains: a wait on a job of it says no active worker serves it.
    waited = taskq_command(
        "submit",
        f"{JOBS}:echo",
        "1",
        "--unchecked",
        "--wait",
        "--wait-timeout",
        "10s",
        store=store_url,
    )
    assert waited.code == 1, waited
    assert "is still queued: no active worker serves queue 'default'" in waited.err, waited
    # Its heartbeats went on meanwhile, and left it draining.
    after = _row(client, worker)
    assert (after.state, after.heartbeat_at > before) == ("draining", True), after

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.describe()
    _assert_stopped(client, worker)


def _row(client: taskq.Client, worker: WorkerProcess) -> WorkerInfo:
    [row] = [row for row in plan.run(client.store, worker_list()) if row.id == worker.worker_id]
    return row


def _assert_stopped(client: taskq.Client, worker: WorkerProcess) -> None:
    row = _row(client, worker)
    assert row.state == "stopped", row
    assert row.pid == worker.pid, row


def test_an_unknown_config_key_stops_the_worker_with_exit_2(
    workers: WorkerFleet, store_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "typo.toml"
    config.write_text("[worker]\nconcurency = 3\n", encoding="utf-8")
    worker = workers.start(store_url, config=config, wait_started=False)
    assert worker.wait(30) == 2, worker.describe()
    lines = [line for line in worker.log_text().splitlines() if line.strip()]
    assert len(lines) == 1, worker.describe()
    assert "concurency" in lines[0], lines[0]
    assert lines[0].startswith("taskq-worker: error:"), lines[0]


@pytest.mark.parametrize("isolation", ["pool", "process"])
def test_a_pinned_worker_runs_its_jobs_on_its_cpus(
    workers: WorkerFleet, client: taskq.Client, store_url: str, isolation: str
) -> None:
    cpu = max(os.sched_getaffinity(0))
    worker = workers.start(store_url, extra_args=["--cpus", str(cpu), "--isolation", isolation])
    assert worker.wait_for_event("worker_started")["cpus"] == str(cpu)
    assert sorted(os.sched_getaffinity(worker.pid)) == [cpu]
    job = client.wait(client.submit(f"{JOBS}:cpu_affinity", unchecked=True).id, timeout=30)
    assert job.state is JobState.SUCCEEDED, job
    assert job.result == [cpu]


def test_a_running_jobs_progress_reaches_the_store(
    workers: WorkerFleet, store_url: str, client: taskq.Client
) -> None:
    worker = workers.start(store_url)
    handle = client.submit(f"{JOBS}:report_and_sleep", 30, unchecked=True)
    assert wait_until(lambda: client.get(handle.id).progress is not None, 20), worker.describe()
    job = client.get(handle.id)
    # The job said where its processes are: forwarded from the sandbox to the store.
    assert (job.progress, (job.progress_message or "").partition("=")[0]) == (0.1, "pgid")


def test_cpus_the_machine_lacks_stop_the_worker_with_exit_2(
    workers: WorkerFleet, store_url: str
) -> None:
    beyond = max(os.sched_getaffinity(0)) + 1
    worker = workers.start(store_url, extra_args=["--cpus", f"0,{beyond}"], wait_started=False)
    assert worker.wait(30) == 2, worker.describe()
    lines = [line for line in worker.log_text().splitlines() if line.strip()]
    assert lines == [
        f"taskq-worker: error: worker: cpus {beyond} not available to this process "
        f"(available: {format_cpu_list(os.sched_getaffinity(0))})"
    ], worker.describe()


def test_an_unreachable_store_stops_the_worker_with_a_clear_error(workers: WorkerFleet) -> None:
    started = time.monotonic()
    worker = workers.start("rqlite://127.0.0.1:1", wait_started=False)
    code = worker.wait(60)
    took = time.monotonic() - started
    print(f"\nunreachable store: exit {code} after {took:.1f} s")
    assert code != 0, worker.describe()
    lines = [line for line in worker.log_text().splitlines() if line.strip()]
    assert len(lines) == 1, worker.describe()
    assert "127.0.0.1:1" in lines[0], lines[0]
    assert "store" in lines[0], lines[0]
    assert "Traceback" not in worker.log_text(), worker.describe()


def test_the_worker_says_at_start_its_store_and_the_declared_queues_it_leaves(
    workers: WorkerFleet, store_url: str
) -> None:
    # No queues given: it takes default alone, while count_words is declared on texts.
    worker = workers.start(store_url, worker={"modules": ["tests.support.counted_jobs"]})
    started = worker.wait_for_event("worker_started")
    # Its store as the store names itself: any password masked.
    assert started["store"] == store_url.partition("?")[0]
    [left] = worker.events("queues_not_taken")
    assert (left["queues"], left["serves"]) == ("texts", "default")
    assert left["hint"].endswith("add --queues default,texts")
    # Queues given are taken as meant: no warning.
    chosen = workers.start(
        store_url, tag="chosen", worker={"modules": ["tests.support.counted_jobs"], "queues": ["a"]}
    )
    chosen.wait_for_event("worker_started")
    assert chosen.events("queues_not_taken") == []
    # Their modules declare a job: once stopped, neither has said that they declare none.
    for each in (worker, chosen):
        each.terminate()
        each.wait_for_event("worker_stopped")
        assert each.events("no_jobs_declared") == [], each.describe()


def test_a_worker_whose_modules_declare_no_job_says_so_at_start(
    workers: WorkerFleet, store_url: str
) -> None:
    # Plain functions, no @taskq.job: they run by path, but a submit by name finds none.
    worker = workers.start(store_url, worker={"modules": ["tests.support.jobs"]})
    told = worker.wait_for_event("no_jobs_declared")
    assert told["modules"] == "tests.support.jobs"
    assert "__init__ imports" in told["hint"], told


def test_a_worker_takes_taskq_store_before_the_config_files_store(tmp_path: Path) -> None:
    # The order of every taskq process: --store, then TASKQ_STORE, then the config file.
    env_store, config_store = (f"sqlite://{tmp_path / name}" for name in ("env.db", "config.db"))
    config = write_config(tmp_path / "config.toml")
    config.write_text(f'[store]\nurl = "{config_store}"\n\n' + config.read_text())
    env = {**worker_environment("w"), "TASKQ_STORE": env_store, "TASKQ_CONFIG": str(config)}
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "taskq.worker.launch", "--log-format", "json"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        assert wait_until(lambda: '"worker_started"' in log.read_text(), 60), log.read_text()
    finally:
        worker.kill()
        worker.wait(30)
    [started] = [
        json.loads(line) for line in log.read_text().splitlines() if '"worker_started"' in line
    ]
    assert started["store"] == env_store, started


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has the file ``path`` open."""
    held = False
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile
            held = held or os.readlink(fd) == str(path)
    return held


def test_a_worker_opens_its_store_while_its_modules_are_imported(tmp_path: Path) -> None:
    """Both are on the way to the first job, so the store is opened while the first
    pool child still imports the worker's modules."""
    go = tmp_path / "go"
    # Imports until told to go (or for long past the wait below).
    (tmp_path / "slow_to_import.py").write_text(
        "import os, time\n"
        "deadline = time.monotonic() + 300\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
    )
    store = tmp_path / "taskq.db"
    open_store(f"sqlite://{store}").close()
    env = {**worker_environment("w"), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    log = tmp_path / "worker.log"
    argv = [sys.executable, "-m", "taskq.worker.launch", "--store", f"sqlite://{store}"]
    argv += ["--modules", "slow_to_import", "--log-format", "json"]
    with log.open("wb") as out:
        worker = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        assert wait_until(lambda: _holds_open(worker.pid, store), 60), log.read_text()
        assert worker.poll() is None, log.read_text()
        go.touch()
        assert wait_until(lambda: '"worker_started"' in log.read_text(), 60), log.read_text()
    finally:
        worker.kill()
        worker.wait(30)


def test_a_worker_whose_modules_do_not_import_makes_no_store(tmp_path: Path) -> None:
    store = tmp_path / "taskq.db"
    ran = run_worker_to_its_end(f"sqlite://{store}", "--modules", "tests.suport")
    assert ran.returncode == 2, ran
    assert list(tmp_path.iterdir()) == [], "a worker that stops at once changes nothing"
