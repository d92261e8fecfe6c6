"""A real store behind a switch: while the switch is off, the store is unreachable.

It delegates every request to a real SQLite store; switched off, each request
raises :class:`taskq.errors.StoreUnavailable`, as an unreachable cluster's
client does, and its nodes report unreachable with no leader.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from taskq import errors
from taskq.broker.stores.store import Consistency, NodeInfo, Row, Statement, StatementResult, Store


class SwitchableStore:
    """A :class:`taskq.broker.stores.store.Store` that can be cut off and brought back."""

    def __init__(self, store: Store, *, delay: float = 0.0) -> None:
        self.store = store
        self.reachable = True
        self.leader = True
        self.delay = delay  # seconds each async request takes, to make polls slow
        self.in_flight = 0
        self.most_in_flight = 0
        self.requests = 0

    @property
    def url(self) -> str:
        return self.store.url

    def _check(self) -> None:
        if not self.reachable:
            raise errors.StoreUnavailable("no node reachable: connection refused")

    async def _slowly(self) -> None:
        self.requests += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        self._check()

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        self._check()
        return self.store.execute(statements, idempotent=idempotent)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        await self._slowly()
        return await self.store.execute_async(statements, idempotent=idempotent)

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        self._check()
        return self.store.query(statement, consistency=consistency)

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        await self._slowly()
        return await self.store.query_async(statement, consistency=consistency)

    def nodes(self) -> list[NodeInfo]:
        nodes = self.store.nodes()
        if self.reachable and self.leader:
            return nodes
        return [dataclasses.replace(node, leader=False, reachable=self.reachable) for node in nodes]

    def close(self) -> None:
        self.store.close()

    async def aclose(self) -> None:
        await self.store.aclose()
