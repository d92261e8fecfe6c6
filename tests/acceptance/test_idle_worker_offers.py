"""An idle worker takes a job through its offer, on both stores (``taskq.broker.ops.offers``).

Once idle, a worker leaves an offer in the store; a job submitted then goes
to it in the submit's own write, and the worker only reads it: the job's
lease token is the offer's. Stopped, the worker takes its offer away.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import taskq
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Consistency, Statement
from taskq.dev.processes import wait_until
from tests.support.rqlite_cluster import STORE_KINDS, RqliteCluster
from tests.support.worker_process import WorkerFleet

WAIT_SECONDS = 60.0


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'taskq.db'}"
    else:
        cluster: RqliteCluster = request.getfixturevalue("rqlite_cluster")
        yield cluster.url


def _read(store: str, sql: str, **params: object) -> list[dict[str, object]]:
    opened = open_store(store)
    try:
        return opened.query(Statement(sql, params), consistency=Consistency.LINEARIZABLE)
    finally:
        opened.close()


def _offer_token(store: str, worker_id: str) -> str | None:
    rows = _read(store, "SELECT token FROM worker_offers WHERE worker_id = :id", id=worker_id)
    return str(rows[0]["token"]) if rows else None


def test_an_idle_worker_runs_a_job_handed_to_its_offer(store: str, workers: WorkerFleet) -> None:
    queue = f"offers-{uuid.uuid4().hex[:8]}"
    worker = workers.start(store, worker={"modules": ["tests.support.jobs"], "queues": [queue]})
    worker.wait_for_event("worker_started", timeout=WAIT_SECONDS)
    assert wait_until(lambda: _offer_token(store, worker.worker_id) is not None, WAIT_SECONDS)
    token = _offer_token(store, worker.worker_id)
    with taskq.Client(store) as client:
        handle = client.submit("tests.support.jobs:add", 2, 3, queue=queue)
        assert handle.result(timeout=WAIT_SECONDS) == 5
    [attempt] = _read(
        store, "SELECT worker_id, lease_token FROM executions WHERE job_id = :id", id=handle.id
    )
    assert attempt["worker_id"] == worker.worker_id
    assert attempt["lease_token"] == f"{token}.{handle.id}", "claimed, not handed"
    # Idle again, it offers anew; stopped, it leaves none behind.
    assert wait_until(lambda: _offer_token(store, worker.worker_id) not in (None, token), 30)
    worker.stop()
    assert _offer_token(store, worker.worker_id) is None
