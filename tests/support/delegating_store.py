"""A store that hands every call to a real one: the base of test stores that change a few."""

from __future__ import annotations

from collections.abc import Sequence

from taskq.broker.stores.store import Consistency, NodeInfo, Row, Statement, StatementResult, Store


class DelegatingStore:
    """A :class:`taskq.broker.stores.store.Store` that passes every call to ``inner``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @property
    def url(self) -> str:
        return self.inner.url

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return self.inner.execute(statements, idempotent=idempotent)

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return await self.inner.execute_async(statements, idempotent=idempotent)

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return self.inner.query(statement, consistency=consistency)

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        return await self.inner.query_async(statement, consistency=consistency)

    def nodes(self) -> list[NodeInfo]:
        return self.inner.nodes()

    async def wait_for_change(self, timeout: float) -> None:
        await self.inner.wait_for_change(timeout)

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()
