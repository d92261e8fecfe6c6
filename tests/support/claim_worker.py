"""One claiming process for concurrency tests: claim and complete until the queue is empty.

Run as ``python -m tests.support.claim_worker STORE_URL QUEUE WORKER_ID READY GO OUT``
from the repository root. The process opens the store, creates the file
READY, waits for the file GO (so that every process starts claiming at the
same moment), then claims 1 to 5 jobs at a time and completes each until a
claim finds nothing. It writes every claim it made, as JSON, to OUT.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from tests.support.reports import completed, report_one

# Long enough that no lease expires during a test: every claim must be the only one.
LEASE_SECONDS = 600.0
GO_TIMEOUT_SECONDS = 60.0
WORK_SECONDS = 0.001


def claim_until_empty(
    store_url: str, queue: str, worker_id: str, ready: Path, go: Path
) -> list[Any]:
    """Claim and complete jobs of ``queue``; return one record per claimed job."""
    store = open_store(store_url, migrate=False)
    try:
        ready.touch()
        deadline = time.monotonic() + GO_TIMEOUT_SECONDS
        while not go.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{worker_id}: no go signal within {GO_TIMEOUT_SECONDS:g} s")
            time.sleep(0.005)
        limits = random.Random(worker_id)
        claims: list[dict[str, Any]] = []
        while True:
            claimed = plan.run(
                store,
                job_claim(
                    worker_id,
                    [queue],
                    limit=limits.randint(1, 5),
                    lease_seconds=LEASE_SECONDS,
                ),
            )
            if not claimed:
                return claims
            for job in claimed:
                # A moment of "work": on SQLite, a process that claims again at once
                # would take the write lock back before the others' busy handlers wake.
                time.sleep(WORK_SECONDS)
                outcome = plan.run(store, report_one(completed(job.lease, {"by": worker_id})))
                claims.append(
                    {
                        "job_id": job.lease.job_id,
                        "token": job.lease.token,
                        "attempt": job.attempt,
                        "outcome": outcome.value,
                    }
                )
    finally:
        store.close()


def main(argv: list[str]) -> int:
    store_url, queue, worker_id, ready, go, out = argv
    claims = claim_until_empty(store_url, queue, worker_id, Path(ready), Path(go))
    Path(out).write_text(json.dumps(claims), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
