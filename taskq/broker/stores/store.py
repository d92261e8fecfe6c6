"""The narrow interface every job store implements, and the records it speaks in.

A store does two things: apply a list of parameterised statements atomically
(one transaction, one request), and answer one read at a chosen consistency.
Each has a blocking and an awaitable entry point; implementations share one
code path behind both, so no operation is written twice.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

import msgspec

SqlValue: TypeAlias = str | int | float | bytes | None
Row: TypeAlias = dict[str, Any]
Params: TypeAlias = Mapping[str, SqlValue]


# Statement and StatementResult are msgspec Structs, made in C: every batch makes a few of
# each, and a frozen dataclass's __init__ cost several times as much (a single submit makes
# three of each).
class Statement(msgspec.Struct, frozen=True):
    """One SQL statement with named parameters (``:name`` in the text)."""

    sql: str
    params: Params = msgspec.field(default_factory=dict)


class StatementResult(msgspec.Struct, frozen=True):
    """What one statement of a batch produced.

    ``rows`` holds the rows of a SELECT or of a write with RETURNING;
    ``rows_affected`` counts the rows a write changed.
    """

    rows: list[Row] = msgspec.field(default_factory=list)
    rows_affected: int = 0
    last_insert_id: int | None = None


class Consistency(enum.StrEnum):
    """How fresh a read must be.

    ``NONE`` reads the local copy of whichever node answers (may be stale);
    ``WEAK`` asks the node that believes it leads (stale only across a
    leadership change); ``LINEARIZABLE`` is confirmed by a quorum, so it sees
    every write acknowledged before it. The embedded store is always
    linearizable.
    """

    NONE = "none"
    WEAK = "weak"
    LINEARIZABLE = "linearizable"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One member of the store as seen from the client.

    ``address`` is the base URL of its API (a file's path for an embedded
    store); ``raft_address`` is where its peers reach it, when known.
    """

    id: str
    address: str
    reachable: bool
    leader: bool
    voter: bool = True
    raft_state: str = ""
    version: str = ""
    error: str = ""
    raft_address: str = ""


class Store(Protocol):
    """A job store: SQLite semantics, atomic batches, reads at a consistency."""

    @property
    def url(self) -> str:
        """The store's URL with any password masked."""
        ...

    def execute(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        """Apply write ``statements`` in one transaction; all of them or none.

        Rows come back from statements with a RETURNING clause (kept on one
        line: rqlite recognises it by the text ``returning `` with a space);
        reads belong in :meth:`query`.

        ``idempotent`` tells a replicated store that applying the batch twice
        has the same effect as once, so it may resend it when the outcome of
        a first try is unknown. Raises a :class:`taskq.errors.StoreError`.
        """
        ...

    async def execute_async(
        self, statements: Sequence[Statement], *, idempotent: bool = False
    ) -> list[StatementResult]:
        """Awaitable form of :meth:`execute`."""
        ...

    def query(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        """Run one read and return its rows as dicts keyed by column name."""
        ...

    async def query_async(
        self, statement: Statement, *, consistency: Consistency = Consistency.WEAK
    ) -> list[Row]:
        """Awaitable form of :meth:`query`."""
        ...

    def nodes(self) -> list[NodeInfo]:
        """Describe the members of the store (one entry for an embedded store)."""
        ...

    async def wait_for_change(self, timeout: float) -> None:
        """Return soon after anyone commits to the store, or after ``timeout`` seconds.

        Idle workers wait here instead of polling with claims: the embedded
        store hears of commits from inotify (``broker/stores/wal_watch.py``); a
        cluster returns after a short poll interval, or on a hint from a
        submitting client (``broker/client/wake_sender.py``), and lets a cheap read decide.
        """
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...

    async def aclose(self) -> None:
        """Awaitable form of :meth:`close`, for stores used from async code."""
        ...


@runtime_checkable
class ChangeTellingStore(Protocol):
    """A store that can say whether its :meth:`Store.wait_for_change` hears of new jobs."""

    @property
    def tells_of_changes(self) -> bool:
        """Whether a wait ends soon after every commit that queues a job, not only after a poll.

        The embedded store sees every commit. A cluster does not say so: a
        hint may be lost, and the look it prompts reads one node's copy,
        which may not have the job yet, so its workers keep polling soon
        after a claim.
        """
        ...


@runtime_checkable
class WriteHoldingStore(Protocol):
    """A store where this process can hold its own writes off for a while: the embedded one.

    There, a process frozen inside a write holds every other writer of the
    file up until it runs again; a process about to stop itself holds its
    writes first (``taskq.worker.suspend``). A cluster's writes hold nothing.
    """

    def writes_held(self) -> AbstractContextManager[object]:
        """While entered, no write of this process is under way or starts (the one under
        way when entered is waited for)."""
        ...


def tells_of_changes(store: object) -> bool:
    """Whether ``store``'s waits end on news of new jobs (see :class:`ChangeTellingStore`)."""
    return isinstance(store, ChangeTellingStore) and store.tells_of_changes
