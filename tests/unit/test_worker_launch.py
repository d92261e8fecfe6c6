"""The ``taskq-worker`` command starts from ``taskq.worker.launch``, which imports the worker
with the cycle collector off (its start is on the way to the first job)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Records whether the collector ran while taskq.worker.main was being imported,
# then starts the worker as the command does, asking only for its version.
_SPY = """
import gc, sys
seen = []

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "taskq.worker.main":
            seen.append(gc.isenabled())
        return None

sys.meta_path.insert(0, Spy())
from taskq.worker import launch
sys.argv = ["taskq-worker", "--version"]
try:
    launch.main()
except SystemExit:
    pass
print(seen, file=sys.stderr)
"""


def test_the_command_is_the_launch_module() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["taskq-worker"] == "taskq.worker.launch:main"


def test_the_worker_is_imported_with_the_collector_off() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _SPY], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.startswith("taskq-worker ")  # the version: the worker's main ran
    assert ran.stderr.strip() == "[False]"
