"""The ``taskq-worker`` command's entry point: the worker's imports made without collecting.

A worker's start is on the way to its first job. What its imports allocate
(modules, classes, their tables) lives as long as the worker, so the cycle
collector finds nothing there, yet it ran every few hundred allocations:
about 4 of the 64 ms that starting Python and importing ``taskq.worker.main``
took on 2 cores. Collection stays off through the start (``main``), and
``serving.serve`` turns it back on once what the start made is frozen out of
its reach.
"""

from __future__ import annotations

import gc
import sys


def main() -> int:
    gc.disable()
    from taskq.worker.main import main as worker_main

    return worker_main()


if __name__ == "__main__":
    sys.exit(main())
