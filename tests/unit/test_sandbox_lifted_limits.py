"""A job that lifts its own limits is still stopped at them, in both isolations, root or not.

Each job raises one rlimit as far as the kernel lets it (to unlimited where
it may, else to its hard limit), then goes past the limit it was given. The
sandbox runs in a process of its own, as this test's user (root, here) and
as ``nobody``: a worker not run by root makes no control groups, so there
the CPU is measured in /proc and the rlimits alone bound the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from typing import Any

import pytest

from tests.support.worker_process import REPO

pytestmark = pytest.mark.timeout(60)

NOBODY = 65534
USERS = ["root", "nobody"]
ISOLATIONS = ["pool", "process"]


# Root's own interpreter may live where nobody can read it (/root): nobody runs
# the system's, of the same version, on this environment's packages.
SYSTEM_PYTHON = "/usr/bin/python3"


def _interpreter_for_nobody() -> str:
    try:
        said = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        said = ""
    if said != str(sys.version_info[:2]):
        pytest.fail(f"no {SYSTEM_PYTHON} of this Python's version for nobody to run")
    return SYSTEM_PYTHON


def _run(user: str, isolation: str, target: str, args: list[Any], limits: dict[str, Any]) -> Any:
    python, as_user = sys.executable, {}
    path = [str(REPO)]
    if user == "nobody":
        if os.geteuid() != 0:
            pytest.fail("running the sandbox as nobody takes root; run the suite as root")
        python = _interpreter_for_nobody()
        as_user = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
        path.append(sysconfig.get_paths()["purelib"])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(path)}
    command = [python, "-m", "tests.support.run_in_sandbox", isolation, target]
    done = subprocess.run(
        [*command, json.dumps(args), json.dumps(limits)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        **as_user,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# What each job lifts, what it then does, and how it must end.
CASES = {
    "cpu": ("lift_cpu_limit_and_spin", [20], {"cpu_seconds": 1}, "cpu"),
    "address_space": (
        "lift_memory_limit_and_allocate", [400 << 20], {"memory_bytes": "128MiB"}, "memory",
    ),
    # Succeeds, having opened fewer files than its limit: its standard streams
    # and the child's sockets are open files too.
    "open_files": ("lift_open_files_limit_and_open", [4096], {"open_files": 64}, "succeeded"),
}  # fmt: skip


@pytest.mark.parametrize("limit", list(CASES))
@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("user", USERS)
def test_a_job_that_lifts_its_limit_is_stopped_at_it(user: str, isolation: str, limit: str) -> None:
    target, args, limits, status = CASES[limit]
    seen = _run(user, isolation, target, args, {**limits, "wall_seconds": 30})
    assert seen["status"] == status, seen
    if limit == "open_files":
        assert 0 < seen["result"] < 64, seen
