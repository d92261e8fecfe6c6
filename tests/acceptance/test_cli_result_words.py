"""What ``taskq result`` says of a job that ended cancelled, and of a wait for one that
waits on a parent no worker serves: the client's words, on both stores. No worker runs."""

from __future__ import annotations

import uuid

import pytest

from tests.support.cli_runs import ok, one_error_line
from tests.support.cli_runs import taskq as taskq_command

pytestmark = [pytest.mark.both_stores, pytest.mark.timeout(120)]

JOBS = "tests.support.jobs"


def _submit(url: str, queue: str, *args: str) -> int:
    return int(ok("submit", "--unchecked", f"{JOBS}:add", *args, "--queue", queue, store=url).out)


def test_result_says_how_a_job_ended_cancelled(store_url: str) -> None:
    queue = f"result-{uuid.uuid4().hex[:8]}"
    parent = _submit(store_url, queue, "1", "2")
    child = _submit(store_url, queue, "3", "4", "--after", str(parent))
    ok("cancel", str(parent), store=store_url)
    said = one_error_line(taskq_command("result", str(parent), store=store_url), 1)
    assert said.endswith(
        f": job {parent} ended cancelled before it ran: cancelled by request while queued"
    )
    said = one_error_line(taskq_command("result", str(child), store=store_url), 1)
    assert said.endswith(
        f": job {child} ended cancelled before it ran: "
        f"ParentFailed: parent job {parent} ended cancelled"
    )


def test_result_json_of_a_job_that_did_not_succeed_prints_its_record_and_exits_1(
    store_url: str,
) -> None:
    queue = f"result-{uuid.uuid4().hex[:8]}"
    job = _submit(store_url, queue, "1", "2")
    ok("cancel", str(job), store=store_url)
    for wait in ((), ("--wait", "--timeout", "5s")):
        ran = taskq_command("result", str(job), "--json", *wait, store=store_url)
        # The whole record on stdout, as for a job that succeeded; the error on stderr.
        said = one_error_line(ran, 1, f"job {job} ended cancelled")
        record = ran.json()
        assert record == ok("status", str(job), "--json", store=store_url).json(), said
        assert (record["id"], record["state"], record["error"]["message"]) == (
            job,
            "cancelled",
            "cancelled by request while queued",
        )


def test_a_wait_for_a_job_after_a_parent_no_worker_serves_names_its_queue(
    store_url: str,
) -> None:
    queue = f"result-{uuid.uuid4().hex[:8]}"
    parent = _submit(store_url, queue, "1", "2")
    child = _submit(store_url, f"{queue}-child", "3", "4", "--after", str(parent))
    waited = taskq_command("result", "--wait", "--timeout", "0.5", str(child), store=store_url)
    one_error_line(
        waited,
        1,
        f"job {child} is still waiting after 0.5 s: its parent job {parent} is queued, "
        f"and no active worker serves queue {queue!r}",
    )
