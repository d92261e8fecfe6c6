"""Every shell and Python block of the README, run as printed and in order, as a newcomer would.

The README's first block is its set-up (``scripts/taskq demo``) and the suite
itself (``scripts/test.sh``, which is running this): the ``.venv`` they make
is the one the other blocks use. The rest run in one shell, as typed into
one terminal: in a directory that is a checkout as far as they can tell
(its ``.venv``), with an empty home (so the default store and config are new)
and no taskq variables. A Python block whose first line names a file
(``# mypkg/tasks.py``) is that file, saved; any other is run with the
virtualenv's ``python`` from that directory.
"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import stop_session
from tests.support.worker_process import REPO

README = REPO / "README.md"
SET_UP = "scripts/taskq demo"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_LINE = re.compile(r"# ([\w/]+\.py)\n")
MARK = "### README block at line"
# The README's own example listens here; the test needs it free.
PORT = 8080
# Bounds a hung block; a whole run takes well under a minute.
RUN_TIMEOUT = 300.0

# What a block prints, for blocks that promise it in their comments.
EXPECTED = {
    "job = add.submit(1, 2)": ["3", "6", "3"],
    # The by-name submit of count_words lands as the declared one: queue texts, 5 attempts.
    "taskq submit mypkg.tasks:add 1 2 --wait": ["3", "6", "2 lines read", "of 5", "texts,"],
    "python -m pytest -q test_tasks.py": ["1 passed"],
    "count_words.map(": ["18"],
    '"args": [2, 3]': ['"id"'],
    # The HTTP client: a by-name submit over taskq serve, its result by long polls.
    'client.submit("mypkg.tasks:add", 4, 5)': ["9"],
}
# What a block must not print: curl -S shows every refused attempt while the server starts.
UNEXPECTED = {'"args": [2, 3]': ["curl: ("]}


def _blocks() -> list[tuple[int, str, str]]:
    """(line, language, text) of each block, in order."""
    text = README.read_text()
    return [
        (text.count("\n", 0, found.start()) + 1, found.group(1), found.group(2))
        for found in BLOCK.finditer(text)
    ]


def _script(blocks: list[tuple[int, str, str]]) -> str:
    """One shell script: a marker line, then the block, for each block."""
    parts = ["set -eo pipefail"]
    for line, language, text in blocks:
        parts.append(f"echo '{MARK} {line}'")
        saved = FILE_LINE.match(text) if language == "python" else None
        if saved:
            path = saved.group(1)
            parts.append(f"mkdir -p \"$(dirname '{path}')\"")
            parts.append(f"cat > '{path}' <<'TASKQ_README_FILE'\n{text}TASKQ_README_FILE")
        elif language == "python":
            parts.append(f"python - <<'TASKQ_README_PYTHON'\n{text}TASKQ_README_PYTHON")
        else:
            parts.append(text)
    parts.append(f"echo '{MARK} end'")
    return "\n".join(parts) + "\n"


def _output_by_block(output: str) -> dict[int, str]:
    pieces = re.split(rf"{MARK} (\d+|end)\n", output)
    return {
        int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces) - 1, 2) if pieces[i] != "end"
    }


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_first_block_is_the_set_up_and_the_suite() -> None:
    _, language, text = _blocks()[0]
    assert language == "sh"
    assert [line.split("#")[0].strip() for line in text.splitlines()] == [
        SET_UP,
        "scripts/test.sh",
    ]


@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_every_block_of_the_readme_runs_as_printed(tmp_path: Path) -> None:
    if not _port_is_free(PORT):
        pytest.fail(f"port {PORT}, which the README's server example uses, is taken")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(REPO / ".venv")
    home = tmp_path / "home"
    home.mkdir()
    blocks = _blocks()[1:]
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    # A file, not a pipe: the background processes the blocks start hold it open.
    log = tmp_path / "output.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-c", _script(blocks)],
            cwd=checkout,
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
    by_block = _output_by_block(output)
    ran = sorted(by_block)
    assert process.returncode == 0, f"the README's block at line {ran[-1]} failed:\n{output}"
    assert ran == [line for line, _, _ in blocks], output
    for line, _, text in blocks:
        for promise, fragments in EXPECTED.items():
            if promise in text:
                for fragment in fragments:
                    assert fragment in by_block[line], f"block at line {line}:\n{by_block[line]}"
        for promise, fragments in UNEXPECTED.items():
            if promise in text:
                for fragment in fragments:
                    assert fragment not in by_block[line], (
                        f"block at line {line}:\n{by_block[line]}"
                    )
    assert all(
        any(promise in text for _, _, text in blocks) for promise in [*EXPECTED, *UNEXPECTED]
    )
