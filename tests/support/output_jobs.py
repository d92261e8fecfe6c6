"""Jobs that print, for the live-output tests: run as ``call`` targets by real workers."""

from __future__ import annotations

import logging
import os
import sys
import time

import taskq

# How long a job waits for its test to let it go: far past any test's patience.
_PATIENCE_SECONDS = 60.0


def print_lines(*lines: str) -> int:
    """Print ``lines`` in one write and end at once: a short job."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()
    return len(lines)


def print_until_released(line: str, release_path: str) -> str:
    """Print ``line``, then wait until ``release_path`` exists; log so at INFO and return."""
    print(line)
    deadline = time.monotonic() + _PATIENCE_SECONDS
    while not os.path.exists(release_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    logging.getLogger("lab.job").info("released by the test")
    return "released"


def count_then_hang_on_first_attempt(lines: int) -> str:
    """Print ``lines`` numbered lines; on the first attempt, then hang (for a kill -9)."""
    for number in range(lines):
        print(f"line {number}")
        time.sleep(0.01)
    if taskq.current_job().attempt == 1:
        time.sleep(_PATIENCE_SECONDS)
    return "done"


def print_bytes(total: int) -> int:
    """Write ``total`` bytes of numbered 100-byte lines to stdout as fast as it can."""
    out = sys.stdout.buffer
    block = b"".join(b"%099d\n" % n for n in range(10_000))  # 1 MB
    written = 0
    while written + len(block) <= total:
        out.write(block)
        written += len(block)
    out.write(block[: total - written])
    out.flush()
    return total
