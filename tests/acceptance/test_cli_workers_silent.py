"""``taskq workers`` tells a worker that says it runs but has not been heard for long.

Only the workers' maintenance marks a worker lost, so where every worker was
killed nobody does: the store keeps them ``active``, and the listing said so
with a heartbeat minutes old and UP still counting.
"""

from __future__ import annotations

import time
from pathlib import Path

from taskq.broker.client.client import Client
from taskq.broker.ops import plan
from taskq.broker.ops.workers import worker_register
from taskq.broker.records import LIVE_SECONDS
from tests.support.cli_runs import ok


def _register(client: Client, name: str, *, now: float) -> None:
    plan.run(
        client.store,
        worker_register(
            name, name=name, host="h", pid=1, queues=["default"], labels=[], slots=2, now=now
        ),
    )


def test_a_worker_unheard_past_the_live_grace_is_shown_silent(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    with Client(url) as client:
        _register(client, "killed", now=time.time() - LIVE_SECONDS - 480)
        _register(client, "running", now=time.time())
    shown = ok("workers", store=url).out
    [killed] = [line for line in shown.splitlines() if line.startswith("killed")]
    [running] = [line for line in shown.splitlines() if line.startswith("running")]
    assert "active (silent)" in killed
    assert "silent" not in running
    assert "active" in running
    assert "not yet marked lost" in shown
    # Its UP ends at its last heartbeat, as a lost one's does: not 8 minutes and counting.
    assert "8m" not in killed.split()[-1]
