"""What a report batch costs SQLite, statement by statement: silent jobs against one line each.

Counted, not timed: SQLite's virtual-machine steps (a progress handler
called at every step), which a loaded machine does not blur. For each kind,
``--jobs`` calls are queued and claimed in a fresh SQLite store, and the
write that would report them all completed (``job_report``, with one line
of output each for ``say``) is run statement by statement on a connection
of its own and rolled back.

    .venv/bin/python -m bench.report_steps [--jobs 50]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path

from taskq.broker.client.client import call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.broker.ops.leases import Report, ReportKind, job_report
from taskq.broker.ops.output import AttemptOutput, OutputChunk
from taskq.broker.ops.plan import Write
from taskq.broker.records import AttemptReport, ClaimedJob
from taskq.broker.stores.store import Store

_KEEP_BYTES = 4 << 20


def _report(job: ClaimedJob, prints: bool) -> Report:
    output = None
    if prints:
        line = f"job {job.lease.job_id} says hello\n"
        # As a worker sends a short job's output: all of it, with the report alone.
        chunk = OutputChunk(0, len(line), line)
        output = AttemptOutput(job.lease, (chunk,), _KEEP_BYTES, first_write=True)
    attempt = AttemptReport(outcome="succeeded")
    return Report(job.lease, ReportKind.COMPLETE, attempt, result_json="1", output=output)


def steps_per_job(store: Store, path: Path, kind: str, jobs: int) -> list[tuple[str, float]]:
    """(the statement's first line, its steps per job) of the report write of ``jobs`` jobs."""
    queue = f"steps-{kind}"
    plan.run(
        store, job_enqueue([call_spec("bench.jobs:echo", [n], queue=queue) for n in range(jobs)])
    )
    claimed = plan.run(store, job_claim("bench", [queue], limit=jobs, lease_seconds=600))
    write = next(job_report([_report(job, kind == "say") for job in claimed]))
    assert isinstance(write, Write), write
    counted = sqlite3.connect(path, isolation_level=None)
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    counted.set_progress_handler(step, 1)
    found = []
    for statement in write.statements:
        steps = 0
        counted.execute("BEGIN")
        counted.execute(statement.sql, dict(statement.params)).fetchall()
        counted.execute("ROLLBACK")
        found.append((statement.sql.strip().splitlines()[0], steps / jobs))
    counted.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50, help="jobs in the report batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="taskq-bench-steps-") as directory:
        path = Path(directory) / "steps.db"
        store = open_store(f"sqlite://{path}")
        try:
            for kind in ("echo", "say"):
                found = steps_per_job(store, path, kind, args.jobs)
                print(f"{kind}: {sum(n for _, n in found):.1f} steps per job")
                for first_line, n in found:
                    print(f"  {n:8.1f}  {first_line[:60]}")
        finally:
            store.close()


if __name__ == "__main__":
    main()
