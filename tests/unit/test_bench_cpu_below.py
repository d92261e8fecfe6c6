"""The bench counts the CPU of every process under a worker, not only its children's.

A pool child is a keeper with the job process under it: counting the
worker's children alone left out the CPU that ran the jobs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import children_of, cpu_below, process_cpu
from taskq.dev.processes import descendants, wait_until

BURN_SECONDS = 0.2
# /proc counts in clock ticks (10 ms): a little below what each burner used.
COUNTED_AT_LEAST = 2 * BURN_SECONDS - 0.05

# A root that starts a middle process, which runs one burner to its end (and
# reaps it) and then another that stays: CPU below the root in both ways it
# can be found, a live grandchild's own and an ended one's in its parent's.
_TREE = textwrap.dedent(
    """
    import resource, subprocess, sys, time
    from pathlib import Path

    BURN = '''
    import resource, sys, time
    from pathlib import Path
    while resource.getrusage(resource.RUSAGE_SELF).ru_utime < {burn}:
        pass
    Path(sys.argv[1]).write_text("burnt")
    time.sleep(600)
    '''
    level, folder = sys.argv[1], Path(sys.argv[2])
    if level == "root":
        subprocess.Popen([sys.executable, "-c", sys.argv[3], "middle", str(folder), sys.argv[3]])
        time.sleep(600)
    else:
        ended = subprocess.Popen([sys.executable, "-c", BURN, str(folder / "first")])
        while not (folder / "first").exists():
            time.sleep(0.01)
        ended.kill()
        ended.wait()
        subprocess.Popen([sys.executable, "-c", BURN, str(folder / "second")])
        time.sleep(600)
    """
).replace("{burn}", str(BURN_SECONDS))


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    root = subprocess.Popen([sys.executable, "-c", _TREE, "root", str(tmp_path), _TREE])
    try:
        yield root.pid, tmp_path
    finally:
        for pid in [*descendants(root.pid), root.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        root.wait()


def test_cpu_below_counts_grandchildren_live_and_reaped(tree: tuple[int, Path]) -> None:
    root, folder = tree
    assert wait_until(lambda: (folder / "second").exists(), 60.0, interval=0.02)
    [middle] = children_of(root)
    assert process_cpu(middle) < BURN_SECONDS  # the root's child alone holds little of it
    assert len(descendants(root)) == 2  # the middle one and the burner that stays
    assert cpu_below(root) >= COUNTED_AT_LEAST
