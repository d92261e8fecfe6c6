"""A running job's output followed live through the store, by ``taskq logs -f`` and the client.

Real ``taskq-worker`` processes on each store kind; the tests keep apart by
queue on the shared rqlite cluster.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.records import AttemptEnded, JobState, OutputDropped, OutputText
from taskq.broker.stores.store import Consistency, Statement
from taskq.dev.processes import wait_until
from tests.support.worker_process import REPO, WorkerFleet

JOBS = "tests.support.output_jobs"


pytestmark = pytest.mark.both_stores


@pytest.fixture
def queue() -> str:
    return f"out-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(store_url: str) -> Iterator[taskq.Client]:
    with taskq.Client(store_url, submitter="acceptance") as opened:
        yield opened


def _stored_text(client: taskq.Client, job_id: int, attempt: int) -> str:
    """What the attempt's output holds now ("" before it starts)."""
    try:
        events = list(client.output(job_id, attempt=attempt))
    except taskq.errors.AttemptNotFound:
        return ""
    return "".join(event.text for event in events if isinstance(event, OutputText))


def _stored_rows(store_url: str, job_id: int) -> tuple[int, str | None]:
    """The job's first attempt as stored: its job_output rows, and its inline output."""
    store = open_store(store_url, migrate=False)
    try:
        [row] = store.query(
            Statement(
                "SELECT output_inline, (SELECT count(*) FROM job_output "
                "WHERE execution_id = executions.id) AS chunks "
                "FROM executions WHERE job_id = :id AND attempt = 1",
                {"id": job_id},
            ),
            consistency=Consistency.LINEARIZABLE,
        )
    finally:
        store.close()
    return int(row["chunks"]), row["output_inline"]


def test_short_jobs_output_goes_inline_and_reads_as_any_other(
    workers: WorkerFleet, client: taskq.Client, store_url: str, queue: str
) -> None:
    workers.start(store_url, worker={"queues": [queue]})
    # The first line after a quiet spell is flushed at once, racing its job's end (then it
    # is a chunk); the jobs after it print within the flush interval: their reports carry it.
    handles = [
        client.submit(f"{JOBS}:print_lines", f"job {n}", "two ✓", queue=queue, unchecked=True)
        for n in range(20)
    ]
    stored = []
    for n, handle in enumerate(handles):
        assert client.wait(handle.id, timeout=60).state is JobState.SUCCEEDED
        text = f"job {n}\ntwo ✓\n"
        chunks, inline = _stored_rows(store_url, handle.id)
        assert (chunks == 0) is (inline is not None), "one record of the output, never two"
        assert inline in (None, text)
        stored.append(inline)
        [execution] = client.executions(handle.id)
        assert (execution.log_tail, execution.output_bytes) == (text, len(text.encode()))
        assert list(client.output(handle.id, follow=True)) == [
            OutputText(1, 0, len(text.encode()), text),
            AttemptEnded(1, "succeeded", None, JobState.SUCCEEDED),
        ]
    inlined = [(h.id, inline) for h, inline in zip(handles, stored, strict=True) if inline]
    assert inlined, "no short job's output went inline"
    job_id, text = inlined[0]
    shown = subprocess.run(
        [sys.executable, "-m", "taskq.cli", "--store", store_url, "logs", "-f", str(job_id)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    assert shown.stdout == text, shown


def _follow(store_url: str, job_id: int) -> subprocess.Popen[str]:
    """``taskq logs -f JOB`` running, its stdout and stderr piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "taskq.cli", "--store", store_url, "logs", "-f", str(job_id)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_logs_f_shows_a_running_jobs_line_then_ends_with_its_outcome(
    workers: WorkerFleet, client: taskq.Client, store_url: str, queue: str, tmp_path: Path
) -> None:
    workers.start(store_url, worker={"queues": [queue]})
    release = tmp_path / "release"
    handle = client.submit(
        f"{JOBS}:print_until_released",
        "hello from the lab",
        str(release),
        queue=queue,
        unchecked=True,
    )
    follower = _follow(store_url, handle.id)
    try:
        assert follower.stdout is not None
        # The job waits for the release file: the line must come while it runs.
        assert follower.stdout.readline() == "hello from the lab\n"
        assert client.get(handle.id).state is JobState.RUNNING
        release.touch()
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    # The job's INFO logging record, on its stderr, is output too: stored, and in the log tail.
    record = " INFO lab.job: released by the test\n"
    assert record in out, out
    ending = "[taskq: attempt 1 ended succeeded; the job's state: succeeded]"
    assert err.strip().endswith(ending), err
    [execution] = client.executions(handle.id)
    assert (execution.log_tail or "").endswith(record), execution
    # Its line went while it ran: the rest goes as a chunk after it, not inline.
    chunks, inline = _stored_rows(store_url, handle.id)
    assert (chunks >= 2, inline) == (True, None)


def test_logs_f_says_when_no_live_worker_takes_the_jobs_queue(
    client: taskq.Client, store_url: str, queue: str
) -> None:
    handle = client.submit(f"{JOBS}:add", 1, 2, queue=queue, unchecked=True)
    follower = _follow(store_url, handle.id)
    try:
        assert follower.stderr is not None
        # Said before it waits, not after: nothing would come to end the wait.
        assert follower.stderr.readline() == (
            f"[taskq: job {handle.id} is queued in queue '{queue}', which no live worker "
            "takes; waiting for one]\n"
        )
        assert follower.poll() is None  # it still follows
    finally:
        follower.kill()
        follower.communicate(timeout=30)


def test_output_survives_a_worker_kill_up_to_its_last_chunk(
    workers: WorkerFleet, client: taskq.Client, store_url: str, queue: str
) -> None:
    first = workers.start(store_url, tag="first", worker={"queues": [queue]})
    handle = client.submit(
        f"{JOBS}:count_then_hang_on_first_attempt",
        50,
        queue=queue,
        max_attempts=2,
        unchecked=True,
    )
    everything = "".join(f"line {n}\n" for n in range(50))
    assert wait_until(lambda: _stored_text(client, handle.id, 1) == everything, timeout=30)
    first.send_signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    workers.start(store_url, tag="second", worker={"queues": [queue]})
    job = client.wait(handle.id, timeout=60)
    assert job.state is JobState.SUCCEEDED, job
    killed, rerun = client.executions(handle.id)
    assert (killed.outcome, killed.log_tail) == ("lease_expired", everything)
    assert rerun.log_tail == everything
    events = list(client.output(handle.id, attempt=1))
    assert events[-1] == AttemptEnded(1, "lease_expired", None, JobState.SUCCEEDED)


def test_a_gigabyte_printer_keeps_within_the_cap_and_the_write_bound(
    workers: WorkerFleet, client: taskq.Client, store_url: str, queue: str
) -> None:
    keep = 1 << 20
    workers.start(
        store_url,
        worker={"queues": [queue], "output_keep_bytes": "1MiB"},
        # The default job limit; the tests' workers allow less.
        max_limits={"output_bytes": "1GiB", "cpu_seconds": 120, "wall_seconds": 300},
    )
    total = 1_000_000_000
    handle = client.submit(
        f"{JOBS}:print_bytes",
        total,
        queue=queue,
        max_attempts=1,
        unchecked=True,
        limits={"cpu_seconds": 120},  # output_bytes as by default: a gigabyte is let through
        timeout=300,
    )
    job = client.wait(handle.id, timeout=300)
    # One attempt: its heartbeats kept its lease all along.
    assert (job.state, job.attempts) == (JobState.SUCCEEDED, 1), job
    [execution] = client.executions(handle.id)
    assert execution.output_bytes == total
    events = list(client.output(handle.id))
    texts = [event for event in events if isinstance(event, OutputText)]
    kept = sum(event.end - event.start for event in texts)
    assert 0 < kept <= keep
    assert events[0] == OutputDropped(1, 0, texts[0].start)
    assert texts[-1].text.endswith(f"{9_999:099d}\n")
