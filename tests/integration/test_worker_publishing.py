"""A worker whose store failed when it published its declared jobs publishes them later,
on both stores; the failure is told once and never stops the worker's loop."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Sequence

import anyio
import pytest

import taskq
from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops.functions import Declaration
from taskq.broker.stores.store import Statement, StatementResult
from taskq.worker.events import EventLog
from taskq.worker.publishing import Publisher
from taskq.worker.store_runner import store_runner
from tests.support.delegating_store import DelegatingStore

pytestmark = pytest.mark.anyio
WAIT_SECONDS = 10.0


class _FailingWrites(DelegatingStore):
    """Refuses the next ``failures`` writes as a store away would, then writes."""

    failures = 0

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        self._maybe_fail()
        return self.inner.execute(statements, idempotent=idempotent)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        self._maybe_fail()
        return await self.inner.execute_async(statements, idempotent=idempotent)

    def _maybe_fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise errors.StoreUnavailable("no leader yet (on purpose)")


async def test_a_publish_that_failed_at_start_is_retried_until_it_lands(url: str) -> None:
    name = f"tests.published_{uuid.uuid4().hex[:8]}:job"
    stream = io.StringIO()
    events = EventLog(stream, format="json")
    store = _FailingWrites(open_store(url))
    publisher = Publisher("w-pub", [Declaration(name=name)], events)
    store.failures = 3  # the one at start, then two retries
    publisher.publish(store)
    assert publisher.pending
    with taskq.Client(store=store.inner) as client:
        assert name not in {each.name for each in client.functions()}
        stopped = anyio.Event()
        with anyio.fail_after(WAIT_SECONDS):
            await publisher.retry(store_runner(store), stopped, every=0.01)
        assert not publisher.pending
        assert store.failures == 0
        assert name in {each.name for each in client.functions()}
    store.close()
    events.flush()
    told = [json.loads(line)["event"] for line in stream.getvalue().splitlines()]
    assert told == ["publish_failed", "jobs_published"]


async def test_a_stopped_worker_stops_retrying(url: str) -> None:
    store = _FailingWrites(open_store(url))
    publisher = Publisher("w-stop", [Declaration(name="tests.never:job")], EventLog(io.StringIO()))
    store.failures = 10**6
    publisher.publish(store)
    stopped = anyio.Event()
    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(publisher.retry, store_runner(store), stopped, 0.01)
            while store.failures > 10**6 - 3:  # it keeps trying, untroubled by failures
                await anyio.sleep(0.01)
            stopped.set()
    assert publisher.pending
    store.close()
