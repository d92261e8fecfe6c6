"""What the ``taskq`` command says where a newcomer first met it saying too little or
the wrong thing: a retry's outcome per job, a workflow retry's count, a --json-job
submit to a store not there yet, a mistyped flag.

Each test runs the real command against a SQLite file of its own; no worker is
needed, as a cancel ends jobs as a failure would for a retry.
"""

from __future__ import annotations

import pytest

from tests.support.cli_runs import ok

pytestmark = pytest.mark.timeout(120)

JOBS = "tests.support.jobs"


def _submit(url: str, *args: str) -> int:
    return int(ok("submit", "--unchecked", *args, "--queue", "newcomer", store=url).out)


def test_a_retry_says_which_jobs_wait_for_their_parents_again(store_url: str) -> None:
    parent = _submit(store_url, f"{JOBS}:add", "1", "2")
    child = _submit(store_url, f"{JOBS}:add", "3", "4", "--after", str(parent))
    alone = _submit(store_url, f"{JOBS}:add", "5", "6")
    # The parent's cancel cancels the child that waits on it.
    ok("cancel", str(parent), str(alone), store=store_url)
    assert ok("status", str(child), "--json", store=store_url).json()["state"] == "cancelled"

    retried = ok("retry", str(parent), str(child), str(alone), store=store_url).out
    assert retried.splitlines() == [
        f"job {parent}: queued again",
        f"job {child}: waiting for its parents again",
        f"job {alone}: queued again",
    ]
    assert ok("status", str(child), "--json", store=store_url).json()["state"] == "waiting"

    ok("cancel", str(parent), str(alone), store=store_url)
    as_json = ok("retry", str(parent), str(child), str(alone), "--json", store=store_url).json()
    assert as_json == [
        {"id": parent, "outcome": "requeued"},
        {"id": child, "outcome": "waiting"},
        {"id": alone, "outcome": "requeued"},
    ]
