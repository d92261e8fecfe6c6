"""``taskq demo``, run as a user runs it: on the embedded store, on a local cluster, interrupted.

The demo starts ``taskq-worker`` processes of its own; each test checks that
they are gone when the demo ends, and stops any that are not, by pid.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.jobs import job_list
from taskq.broker.ops.workers import worker_list
from taskq.broker.records import Job, JobState
from taskq.cli.demo import DEMO_QUEUE
from tests.support.rqlite_cluster import RqliteCluster
from tests.support.worker_process import REPO, process_gone, wait_until

DEMO_TIMEOUT = 180.0


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    return {**env, **(extra or {})}


def _demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m taskq.cli ARGS`` to the end (killed by pid if it overruns)."""
    return subprocess.run(
        [sys.executable, "-m", "taskq.cli", *args],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        env=_environment(env),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def _worker_pids(output: str) -> list[int]:
    found = re.search(r"\(pids ([\d, ]+)\)", output)
    assert found, output
    return [int(pid) for pid in found.group(1).split(", ")]


@pytest.fixture
def demo_workers() -> Iterator[list[int]]:
    """The pids of the demo's workers, as a test learns them; any still alive is killed after."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not process_gone(pid):
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def _demo_jobs(url: str, count: int) -> list[Job]:
    store = open_store(url)
    try:
        return plan.run(store, job_list(queue=DEMO_QUEUE, limit=count))
    finally:
        store.close()


def _assert_demo_finished(ran: subprocess.CompletedProcess[str], url: str, jobs: int) -> None:
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    out = ran.stdout
    assert f"taskq demo: {jobs} sample jobs on {url}, queue {DEMO_QUEUE}" in out
    assert f"[{'#' * 24}] {jobs}/{jobs} finished" in out
    for row in (
        r"succeeded at once +\d+",
        r"succeeded after retrying +1 +\d+ +job \d+, attempt 1: .*UpstreamTimeout",
        r"dead +1 +2 +job \d+: MemoryError at its memory limit of 256MiB",
    ):
        assert re.search(row, out), f"no row {row!r} in:\n{out}"
    assert f"all {jobs} jobs finished" in out
    assert f"taskq-tui --store {url}" in out
    assert f"taskq --store {url} jobs --queue {DEMO_QUEUE}" in out


def _assert_hints_work_as_printed(out: str, dead_id: int) -> None:
    """The closing hints run as printed, in the shell the demo ran in (no venv on PATH needed)."""
    hints = out.partition("Look around")[2].splitlines()[1:]
    commands = [
        line.split("#")[0].strip() for line in hints if " jobs --queue " in line or " logs " in line
    ]
    assert len(commands) == 2, out
    for line in commands:
        ran = subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            timeout=60,
            env=_environment(),
            cwd=REPO,
        )
        assert ran.returncode == 0, f"{line}\n{ran.stdout}{ran.stderr}"
    assert str(dead_id) in ran.stdout


def test_demo_on_the_embedded_store(tmp_path: Path, demo_workers: list[int]) -> None:
    url = f"sqlite://{tmp_path / 'demo.db'}"
    ran = _demo("--store", url, "demo", "--jobs", "8", "--workers", "2", "--timeout", "2m")
    demo_workers.extend(_worker_pids(ran.stdout))
    _assert_demo_finished(ran, url, 8)
    assert len(demo_workers) == 2
    assert all(process_gone(pid) for pid in demo_workers)

    jobs = _demo_jobs(url, 100)
    assert len(jobs) == 8
    states = sorted(job.state.value for job in jobs)
    assert states == ["dead"] + ["succeeded"] * 7
    [dead] = [job for job in jobs if job.state is JobState.DEAD]
    assert dead.attempts == 2
    assert dead.error is not None
    assert dead.error["status"] == "memory"
    assert sorted(job.attempts for job in jobs if job.payload["target"].endswith(":flaky")) == [2]
    _assert_hints_work_as_printed(ran.stdout, dead.id)

    store = open_store(url)
    try:
        workers = plan.run(store, worker_list())
    finally:
        store.close()
    assert sorted((w.name, w.state) for w in workers) == [
        ("demo-1", "stopped"),
        ("demo-2", "stopped"),
    ]


def test_demo_on_the_running_local_cluster(
    rqlite_cluster: RqliteCluster, tmp_path: Path, demo_workers: list[int]
) -> None:
    """``--cluster`` finds the cluster that ``taskq dev cluster`` recorded, and uses it."""
    cluster_dir = tmp_path / "taskq-cluster"
    cluster_dir.mkdir()
    (cluster_dir / "url").write_text(rqlite_cluster.url + "\n")
    ran = _demo(
        *("demo", "--cluster", "--jobs", "5", "--workers", "1"),
        env={"TASKQ_CLUSTER_DIR": str(cluster_dir)},
    )
    demo_workers.extend(_worker_pids(ran.stdout))
    _assert_demo_finished(ran, rqlite_cluster.url, 5)
    assert "starting" not in ran.stderr
    assert all(process_gone(pid) for pid in demo_workers)


def _free_port_base(count: int) -> int:
    """A port such that it and the ``count - 1`` after it are free on loopback now."""
    for _ in range(100):
        base = random.randrange(20_000, 60_000, 2)
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return base
    raise AssertionError("no run of free ports found")


def test_demo_starts_the_local_cluster_when_none_runs(
    tmp_path: Path, rqlite_cluster: RqliteCluster, demo_workers: list[int]
) -> None:
    """With no cluster recorded, ``--cluster`` starts one as ``taskq dev cluster start`` does.

    The cluster runs on free ports in a directory of this test's own, and is
    stopped after it: by ``taskq dev cluster stop``, then any node left by its recorded pid.
    (``rqlite_cluster`` makes sure an rqlited is installed.)
    """
    cluster_dir = tmp_path / "taskq-cluster"
    env = {
        "TASKQ_CLUSTER_DIR": str(cluster_dir),
        "TASKQ_CLUSTER_HTTP_BASE": str(_free_port_base(6)),
        "TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", ""),
    }
    try:
        ran = _demo("demo", "--cluster", "--jobs", "4", "--workers", "1", env=env)
        demo_workers.extend(_worker_pids(ran.stdout))
        url = (cluster_dir / "url").read_text().strip()
        assert "no local cluster is running: starting one" in ran.stderr
        _assert_demo_finished(ran, url, 4)
        assert all(process_gone(pid) for pid in demo_workers)
    finally:
        subprocess.run(
            [sys.executable, "-m", "taskq.cli", "dev", "cluster", "stop"],
            env=_environment(env),
            capture_output=True,
            timeout=60,
            check=False,
        )
        for pidfile in cluster_dir.glob("node*/pid"):
            with suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_dev_cluster_starts_reports_and_stops_its_nodes_and_workers(
    tmp_path: Path, rqlite_cluster: RqliteCluster, demo_workers: list[int]
) -> None:
    """``taskq dev cluster``: a node and a worker that outlive ``start``, stopped by ``stop``."""
    cluster_dir = tmp_path / "taskq-cluster"
    options = ("--dir", str(cluster_dir))
    env = {"TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", "")}
    base = str(_free_port_base(2))
    try:
        started = _demo(
            *("dev", "cluster", "start", *options, "--nodes", "1", "--workers", "1"),
            *("--http-base", base),
            env=env,
        )
        assert started.returncode == 0, started.stderr
        url = f"rqlite://127.0.0.1:{base}"
        assert started.stdout.strip().splitlines()[-1] == url
        node_pid = int((cluster_dir / "node1" / "pid").read_text())
        demo_workers.append(int((cluster_dir / "worker1" / "pid").read_text()))

        status = _demo("dev", "cluster", "status", *options, env=env)
        assert status.returncode == 0, status.stderr
        assert re.search(rf"node1 +{node_pid} +127\.0\.0\.1:{base} +Leader +node1", status.stdout)
        assert f"worker1: running, pid {demo_workers[0]}" in status.stdout
        assert f"store URL: {url}" in status.stdout

        stopped = _demo("dev", "cluster", "stop", *options, env=env)
        assert stopped.returncode == 0, stopped.stderr
        assert "stopped 1 node(s)" in stopped.stderr
        assert process_gone(node_pid)
        assert process_gone(demo_workers[0])
        after = _demo("dev", "cluster", "status", *options, env=env)
        assert after.returncode == 1
        assert re.search(r"node1 +- +\S+ +down", after.stdout), after.stdout
    finally:
        for pidfile in cluster_dir.glob("node*/pid"):
            with suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_an_interrupted_demo_cancels_its_jobs_and_stops_its_workers(
    tmp_path: Path, demo_workers: list[int]
) -> None:
    url = f"sqlite://{tmp_path / 'demo.db'}"
    # No job of the demo may start, so that it is still waiting when interrupted
    # however slow the machine (it resumes its queue, but leaves the limit be).
    with taskq.Client(url) as client:
        client.set_queue_limits(DEMO_QUEUE, max_running=0, create=True)
    out_path, err_path = tmp_path / "demo.out", tmp_path / "demo.err"
    # A background job of a non-interactive shell (a CI runner's, say) ignores SIGINT, and
    # a child inherits an ignored signal: the demo gets SIGINT's default disposition.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    with out_path.open("w") as out, err_path.open("w") as err:
        demo = subprocess.Popen(
            [sys.executable, "-m", "taskq.cli", "--store", url, "demo", "--workers", "1"],
            stdout=out,
            stderr=err,
            env=_environment(),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )
    signal.signal(signal.SIGINT, ignored)
    try:
        assert wait_until(lambda: "(pids" in out_path.read_text(), 30), err_path.read_text()
        demo_workers.extend(_worker_pids(out_path.read_text()))

        def all_submitted() -> bool:
            return len(_demo_jobs(url, 100)) == 40

        assert wait_until(all_submitted, 60, interval=0.2), err_path.read_text()
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 130
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert "demo stopped: cancelling its jobs, stopping its workers" in err_path.read_text()
    assert all(process_gone(pid) for pid in demo_workers)
    jobs = _demo_jobs(url, 100)
    assert len(jobs) == 40
    assert all(job.state is JobState.CANCELLED for job in jobs), [(j.id, j.state) for j in jobs]


def test_cluster_and_store_together_are_a_usage_error(tmp_path: Path) -> None:
    ran = _demo("--store", f"sqlite://{tmp_path / 'x.db'}", "demo", "--cluster")
    assert ran.returncode == 2
    assert ran.stderr.strip() == (
        "taskq: error: --cluster and --store both name a store: give one of them"
    )
