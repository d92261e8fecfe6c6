"""What a user's test pays to run a job inline: ``python -m bench.inline [--jobs N]``.

Each round submits one job to a ``taskq.testing`` temporary store, runs it
with ``run_due`` and reads its result, as a test would; the figures are per
round. The issue's bar: under 10 ms.
"""

from __future__ import annotations

import argparse
import json
import time

import taskq.testing


def inline_rounds(jobs: int) -> dict[str, float]:
    """Submit, run inline and read back ``jobs`` jobs one by one; milliseconds per round."""
    timings = []
    with taskq.testing.temporary_client(submitter="bench") as client:
        for number in range(jobs + 1):
            started = time.perf_counter()
            handle = client.submit("bench.jobs:echo", number, unchecked=True)
            taskq.testing.run_due(client)
            result = handle.result(timeout=0)
            elapsed = time.perf_counter() - started
            if result != number:
                raise RuntimeError(f"job {handle.id} returned {result!r}, not {number}")
            if number:  # the first round imports the job's module: not a test's usual cost
                timings.append(elapsed)
    ordered = sorted(timings)
    return {
        "jobs": jobs,
        "ms_per_job": 1000 * sum(timings) / jobs,
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max_ms": 1000 * ordered[-1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inline")
    parser.add_argument("--jobs", type=int, default=500, help="rounds to time (default 500)")
    args = parser.parse_args(argv)
    print(json.dumps(inline_rounds(args.jobs), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
