"""The rqlite tier on a machine without rqlited, and with one: pytest run as a process.

A small suite of three tests (one plain, one marked ``rqlite``, one using the
``rqlite_cluster`` fixture) under the tier plugin, with an empty cache and a
PATH without rqlited or go, as on a fresh machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.rqlite_cluster import REPO

SUITE = {
    "conftest.py": """
import pytest

pytest_plugins = ["tests.support.rqlite_tier"]


@pytest.fixture
def rqlite_cluster():
    return "a cluster"
""",
    "test_suite.py": """
import os

import pytest


def test_plain():
    pass


@pytest.mark.rqlite
def test_marked():
    assert os.access(os.environ["TASKQ_RQLITED"], os.X_OK)


def test_on_the_cluster(rqlite_cluster):
    assert rqlite_cluster == "a cluster"
""",
}
# Tests outside the tier that reach it anyway: each must fail, with rqlited or without.
LEAKS = {
    "conftest.py": SUITE["conftest.py"],
    "test_leaks.py": """
import os
import subprocess

import pytest

from taskq.dev.rqlited import find_rqlited


def test_gets_the_cluster_by_name(request):
    request.getfixturevalue("rqlite_cluster")


def test_starts_rqlited_itself():
    subprocess.run([find_rqlited(), "-version"], check=False)


def test_starts_rqlited_through_a_process():
    subprocess.run(["sh", "-c", '"$TASKQ_RQLITED" -version'], check=False)


@pytest.mark.rqlite
def test_in_the_tier_starts_it(request):
    request.getfixturevalue("rqlite_cluster")
    subprocess.run([find_rqlited(), "-version"], check=True)
""",
}
NOT_RUN = "rqlite tier not run: rqlited is missing: set TASKQ_RQLITED"


def _pytest(
    tmp_path: Path, suite_files: dict[str, str] = SUITE, **env: str
) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite"
    if not suite.exists():
        suite.mkdir()
        for name, text in suite_files.items():
            (suite / name).write_text(text)
    bare = {
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "TERM": "dumb",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", str(suite)],
        env={**bare, **env},
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _lines_with(text: str, part: str) -> list[str]:
    return [line for line in text.splitlines() if part in line]


@pytest.fixture(autouse=True)
def _no_rqlited_on_the_bare_path() -> None:
    for directory in ("/usr/bin", "/bin"):
        assert not os.path.exists(f"{directory}/rqlited"), "this machine's PATH has rqlited"


def test_without_rqlited_the_tier_is_one_skip_with_a_banner_and_the_rest_runs(
    tmp_path: Path,
) -> None:
    ran = _pytest(tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    banner = _lines_with(ran.stdout, NOT_RUN)
    assert len(banner) == 2, ran.stdout  # the banner at the start, the summary line at the end
    assert banner[0].startswith("!")
    assert banner[1].startswith("SKIPPED [2] ")
    assert "1 passed, 2 skipped" in ran.stdout


def test_required_without_rqlited_the_run_fails_with_the_same_line(tmp_path: Path) -> None:
    ran = _pytest(tmp_path, TASKQ_REQUIRE_RQLITE="1")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "1 passed, 2 skipped" in ran.stdout
    [failed] = _lines_with(ran.stdout, "FAILED (TASKQ_REQUIRE_RQLITE=1)")
    assert NOT_RUN in failed


def test_with_rqlited_every_test_of_the_tier_runs(tmp_path: Path) -> None:
    fake = tmp_path / "rqlited"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    ran = _pytest(tmp_path, TASKQ_RQLITED=str(fake), TASKQ_REQUIRE_RQLITE="1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 passed" in ran.stdout
    assert "skipped" not in ran.stdout
    assert f"rqlite tier: {fake}" in ran.stdout


def _fake_rqlited(tmp_path: Path) -> Path:
    fake = tmp_path / "rqlited"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("rqlited", ["missing", "found"])
def test_a_test_outside_the_tier_that_reaches_it_fails(tmp_path: Path, rqlited: str) -> None:
    env = {"TASKQ_RQLITED": str(_fake_rqlited(tmp_path))} if rqlited == "found" else {}
    ran = _pytest(tmp_path, LEAKS, **env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    leaks = {
        "gets_the_cluster_by_name": "reached the rqlite_cluster",
        "starts_rqlited_itself": "started rqlited",
        "starts_rqlited_through_a_process": "started rqlited",
    }
    for leak, what in leaks.items():
        outcomes = _lines_with(ran.stdout, f" test_leaks.py::test_{leak}")
        assert any(line.startswith(("FAILED", "ERROR")) for line in outcomes), ran.stdout
        assert f"test_leaks.py::test_{leak} {what} but is not in the rqlite tier" in ran.stdout
    if rqlited == "found":
        [tier_test] = _lines_with(ran.stdout, " test_leaks.py::test_in_the_tier_starts_it")
        assert tier_test.startswith("PASSED"), ran.stdout
    else:
        assert "1 skipped" in ran.stdout, ran.stdout
