"""``taskq stats``: attempts are counted under the minute of the clock they ended in."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from taskq.broker.client.client import Client, call_spec
from taskq.broker.client.connect import open_store
from taskq.broker.ops import plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.enqueue import job_enqueue
from taskq.cli.cluster import finished_per_minute
from tests.support.reports import completed, report_one


def _local(hour: int, minute: int, second: float) -> float:
    """A fixed local time on a day without a clock change."""
    return time.mktime((2026, 1, 14, hour, minute, 0, 0, 0, -1)) + second


def test_attempts_are_counted_under_the_minute_they_ended_in(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path / 'taskq.db'}")
    run = partial(plan.run, store)
    ended = [_local(4, 19, 8), _local(4, 19, 20), _local(4, 20, 0), _local(4, 20, 5)]
    run(job_enqueue([call_spec("m:f", queue="q") for _ in ended], now=_local(4, 10, 0)))
    claimed = run(job_claim("w", ["q"], limit=len(ended), lease_seconds=600, now=_local(4, 11, 0)))
    for job, at in zip(claimed, ended, strict=True):
        run(report_one(completed(job.lease, None), now=at))

    with Client(store=store) as client:
        minutes = finished_per_minute(client, 3, now=_local(4, 20, 10))

    counted = [
        (time.strftime("%H:%M", time.localtime(start)), bucket.outcomes)
        for start, bucket in minutes
    ]
    # 04:19:08 and 04:19:20 under 04:19, not under 04:20 as 60 s back from 04:20:10 had them;
    # 04:20:00 on its minute's first instant.
    assert counted == [
        ("04:18", {}),
        ("04:19", {"succeeded": 2}),
        ("04:20", {"succeeded": 2}),
    ]
