"""docs/workflows.md's image pipeline, run as printed: module, worker, submits, test.

Its blocks name files under ``/tmp``; here that folder is the test's own
(every ``/tmp/`` becomes it), and nothing else of a block changes. The
Python blocks run as one script, as typed into one interpreter (the
spawning one uses the first one's client). A block that only sketches a
shape (a diamond over jobs the page does not define) is named below and
left out.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import stop_session
from tests.support.worker_process import REPO

DOC = REPO / "docs" / "workflows.md"
BLOCK = re.compile(r"^```(console|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SKETCHES = ("prepared = prepare.step(url)",)
RUN_TIMEOUT = 240.0


def _blocks(tmp: Path) -> list[tuple[str, str]]:
    text = DOC.read_text().replace("/tmp/", f"{tmp}/")
    return [(found.group(1), found.group(2)) for found in BLOCK.finditer(text)]


def _script(blocks: list[tuple[str, str]]) -> str:
    """One shell script: the module saved, the console lines, the Python, then the test."""
    lines = ["set -eo pipefail"]
    python: list[str] = []
    for language, text in blocks:
        if any(sketch in text for sketch in SKETCHES):
            continue
        if language == "console":
            lines += [line.removeprefix("$ ") for line in text.splitlines()]
        elif text.startswith("# thumbs.py\n"):
            lines.append(f"cat > thumbs.py <<'TASKQ_DOC'\n{text}TASKQ_DOC")
        elif "def test_" in text:
            lines.append(f"cat > test_thumbs.py <<'TASKQ_DOC'\n{text}TASKQ_DOC")
        else:
            python.append(text)
    lines.append("python - <<'TASKQ_DOC'\n" + "\n".join(python) + "TASKQ_DOC")
    lines.append("python -m pytest -q -p no:cacheprovider test_thumbs.py")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_the_image_pipeline_of_the_workflows_page_runs_as_printed(tmp_path: Path) -> None:
    blocks = _blocks(tmp_path)
    assert all(any(sketch in text for _, text in blocks) for sketch in SKETCHES)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": f"{REPO / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    log = tmp_path / "output.log"  # a file: the worker in the background holds it open
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-c", _script(blocks)],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        process.wait(timeout=RUN_TIMEOUT)
    finally:
        stop_session(process)
    output = log.read_text()
    assert process.returncode == 0, output
    printed = [line for line in output.splitlines() if line.strip().isdigit()]
    # The index's lines, from the handle and from the one read back by id; then the
    # images scan found.
    assert printed == ["3", "3", "3"], output
    assert len((tmp_path / "index.jsonl").read_text().splitlines()) == 3
    assert "1 passed" in output
