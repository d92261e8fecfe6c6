"""What a start on a store leaves out: httpx, which only the HTTP client needs, and
the modules of the other ``taskq`` commands.

Importing httpx (and, through its own command line, click, rich and pygments)
doubled every ``taskq`` command's start on a store; these fail if a module
on the way imports it again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _modules_after(program: str, *names: str) -> dict[str, bool]:
    """Which of ``names`` ``program`` has imported, run in a Python of its own."""
    probe = f"import json, sys\nprint(json.dumps([n in sys.modules for n in {names!r}]))"
    ran = subprocess.run(
        [sys.executable, "-c", f"{program}\n{probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(zip(names, json.loads(ran.stdout.strip().splitlines()[-1]), strict=True))


def _imports_httpx(program: str) -> bool:
    return _modules_after(program, "httpx")["httpx"]


def test_the_command_line_starts_without_httpx() -> None:
    assert not _imports_httpx("import taskq.cli.main")


def test_a_client_on_an_embedded_store_works_without_httpx(tmp_path: Path) -> None:
    program = (
        "import taskq\n"
        f"client = taskq.Client('sqlite:///{tmp_path}/jobs.db')\n"
        "client.submit_shell('true')\n"
    )
    assert not _imports_httpx(program)


def test_a_client_of_a_server_imports_httpx() -> None:
    # The other side of the two above: the probe would pass on a renamed module.
    assert _imports_httpx("import taskq\ntaskq.Client('http://127.0.0.1:9')")


def test_a_command_imports_its_own_module_and_not_the_others(tmp_path: Path) -> None:
    # The rqlite transport (ssl, http.client) and the dev cluster came with every command
    # when the parser imported every command's module.
    program = (
        "from taskq.cli.main import main\n"
        f"main(['--store', 'sqlite:///{tmp_path}/jobs.db', 'jobs', '--json'])\n"
    )
    found = _modules_after(program, "taskq.cli.jobs", "taskq.cli.demo", "taskq.cli.cluster", "ssl")
    assert found == {
        "taskq.cli.jobs": True,
        "taskq.cli.demo": False,
        "taskq.cli.cluster": False,
        "ssl": False,
    }
