"""``taskq dev cluster stop`` stops every node it recorded, however ``--dir`` was written,
and names a node it leaves running rather than forgetting it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taskq.dev.processes import runs_with
from tests.support.cli_runs import COMMAND_TIMEOUT, Ran, taskq
from tests.support.rqlite_cluster import free_base, kill_still_running, recorded_processes


def _taskq_from(cwd: Path, *args: str, env: dict[str, str]) -> Ran:
    """``taskq ARGS`` run from ``cwd``, where a relative ``--dir`` is read from."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TASKQ_")}
    done = subprocess.run(
        [sys.executable, "-m", "taskq.cli", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env={**clean, **env},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


@pytest.mark.rqlite
@pytest.mark.timeout(180)
def test_a_node_added_through_a_relative_dir_is_shown_and_stopped_with_the_others(
    tmp_path: Path,
) -> None:
    directory = (tmp_path / "c2").resolve()
    env = {"TASKQ_RQLITED": os.environ.get("TASKQ_RQLITED", "")}
    nodes: dict[int, str] = {}
    try:
        started = taskq(
            "dev", "cluster", "start", "--dir", str(directory),
            "--http-base", str(free_base(8)), env=env,
        )  # fmt: skip
        nodes |= recorded_processes(directory)
        assert started.code == 0, started.err
        added = _taskq_from(directory.parent, "dev", "cluster", "add", "--dir", "c2", env=env)
        nodes |= recorded_processes(directory)
        assert added.code == 0, added.err
        assert len(nodes) == 4
        cmdline = (directory / "node4" / "cmdline").read_text().splitlines()
        assert cmdline[-1] == str(directory / "node4" / "data")

        status = taskq("dev", "cluster", "status", "--dir", str(directory), env=env)
        assert status.code == 0, status.err
        states = {
            line.split()[0]: line.split()[3]
            for line in status.out.splitlines()
            if line.startswith("node")
        }
        assert set(states) == {"node1", "node2", "node3", "node4"}
        assert set(states.values()) <= {"Leader", "Follower"}, status.out

        stopped = taskq("dev", "cluster", "stop", "--dir", str(directory), env=env)
        assert stopped.code == 0, stopped.err
        assert "taskq dev cluster: stopped 4 node(s)" in stopped.err.splitlines()
        assert [pid for pid, data_dir in nodes.items() if runs_with(pid, data_dir)] == []
        assert list(directory.glob("node*/pid")) == []
    finally:
        nodes |= recorded_processes(directory)
        taskq("dev", "cluster", "stop", "--dir", str(directory), env=env)
        kill_still_running(nodes)


@pytest.mark.timeout(60)
def test_stop_names_a_node_whose_pid_runs_another_program_and_keeps_its_record(
    tmp_path: Path,
) -> None:
    directory = (tmp_path / "cluster").resolve()
    node = directory / "node1"
    node.mkdir(parents=True)
    (node / "http").write_text("127.0.0.1:4001\n")
    (node / "raft").write_text("127.0.0.1:4002\n")
    # A program that took the recorded pid: its command line names no data directory.
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    try:
        (node / "pid").write_text(f"{other.pid}\n")
        ran = taskq("dev", "cluster", "stop", "--dir", str(directory))
        assert ran.code == 1, ran.err
        lines = ran.err.strip().splitlines()
        assert lines[0].startswith(
            f"taskq dev cluster: node1: not stopped: pid {other.pid} runs without "
            f"{node / 'data'} on its command line"
        )
        assert lines[1:] == [
            "taskq dev cluster: stopped 0 node(s)",
            "taskq: error: not stopped, still running: node1",
        ]
        assert other.poll() is None
        assert (node / "pid").read_text() == f"{other.pid}\n"
    finally:
        other.kill()
        other.wait(timeout=10)
