"""The commands the local cluster tells its user to run name the cluster they mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq.dev.local_cluster import DIR_ENV, LocalCluster


def test_the_default_cluster_needs_no_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DIR_ENV, str(tmp_path / "cluster"))
    assert LocalCluster().command("stop") == "taskq dev cluster stop"


def test_another_cluster_is_named_by_its_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(DIR_ENV, raising=False)
    elsewhere = tmp_path / "my lab"
    # Quoted for the shell: the line is to be pasted as it is.
    assert LocalCluster(directory=elsewhere).command("stop") == (
        f"taskq dev cluster stop --dir '{elsewhere}'"
    )


def test_a_relative_dir_is_made_absolute_from_where_the_command_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A node is found again by the absolute data directory on its command line.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DIR_ENV, raising=False)
    assert LocalCluster(directory=Path("c2")).directory == tmp_path.resolve() / "c2"
    monkeypatch.setenv(DIR_ENV, "lab")
    assert LocalCluster().directory == tmp_path.resolve() / "lab"


def test_the_workers_get_queues_only_when_given() -> None:
    assert LocalCluster(modules="mypkg.tasks").worker_args() == ("--modules", "mypkg.tasks")
    assert LocalCluster(modules="mypkg.tasks", queues="default,texts").worker_args() == (
        "--modules", "mypkg.tasks", "--queues", "default,texts",
    )  # fmt: skip
