"""Sample jobs for ``taskq demo``: quick ones, flaky ones that succeed on a retry, a memory hog.

They run inside a worker's sandbox, so they import only the standard
library and :mod:`taskq.worker.progress` (cheap: no broker, no HTTP client).
"""

from __future__ import annotations

import time
from pathlib import Path

from taskq.worker import progress


class UpstreamTimeout(Exception):
    """The error a flaky demo job raises on purpose."""


def crunch(n: int, seconds: float) -> dict[str, int]:
    """Work for ``seconds`` (reporting progress as it goes), then return a small result."""
    steps = 4
    for step in range(steps):
        progress.report(step / steps, f"step {step + 1} of {steps}")
        time.sleep(seconds / steps)
    total = sum(i * i for i in range(n))
    print(f"crunched {n} numbers in {seconds:.2f}s")
    return {"n": n, "sum_of_squares": total}


def flaky(marker: str, failures: int) -> str:
    """Fail the first ``failures`` attempts, then succeed.

    Attempts are counted in the file ``marker``: the demo's workers run on
    the machine that ran ``taskq demo``, which made the directory it is in.
    """
    path = Path(marker)
    attempt = int(path.read_text() or "0") + 1 if path.exists() else 1
    path.write_text(str(attempt))
    print(f"attempt {attempt}: calling the upstream service")
    if attempt <= failures:
        raise UpstreamTimeout(f"upstream timed out (fails {failures}x on purpose)")
    return f"succeeded on attempt {attempt}"


def hog(step_mib: int) -> int:
    """Allocate memory ``step_mib`` MiB at a time until the job's memory limit stops it."""
    held = []
    while True:
        held.append(b"\x01" * (step_mib << 20))
        print(f"holding {len(held) * step_mib} MiB")
