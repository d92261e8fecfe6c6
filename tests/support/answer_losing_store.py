"""A store that loses the answer to a chosen write, as a leader dying mid-commit does.

Wrapped around a real store, it raises :class:`taskq.errors.OutcomeUnknown`
for the next write that is not idempotent, either without applying it (the
request never took effect) or after applying it (it took effect, but the
answer never came back). Idempotent writes pass untouched, because the rqlite
transport resends those itself; the broker's own resolution of unknown
outcomes (claims and reports) is what this exercises.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from taskq import errors
from taskq.broker.stores.store import Statement, StatementResult, Store
from tests.support.delegating_store import DelegatingStore


class Loss(enum.Enum):
    """Where the answer to a write is lost."""

    BEFORE_APPLY = "before_apply"
    AFTER_APPLY = "after_apply"


class AnswerLosingStore(DelegatingStore):
    """A :class:`taskq.broker.stores.store.Store` that loses the answer to one armed write."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed: Loss | None = None

    def lose_next_answer(self, loss: Loss | None) -> None:
        """Lose the answer to the next write that is not idempotent (None disarms)."""
        self.armed = loss

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        loss = None if idempotent else self.armed
        if loss is None:
            return self.inner.execute(statements, idempotent=idempotent)
        self.armed = None
        if loss is Loss.AFTER_APPLY:
            self.inner.execute(statements, idempotent=idempotent)
        raise errors.OutcomeUnknown(f"answer lost on purpose ({loss.value})")

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        return self.execute(statements, idempotent=idempotent)
