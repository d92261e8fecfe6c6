"""Raw reads of the jobs and executions of one queue, for tests that check invariants.

Tests look at the stored rows themselves rather than at the broker's records,
so that a mistake in the broker's parsing cannot hide a mistake in its SQL.
Reads are linearizable, so on rqlite they see every acknowledged write.
"""

from __future__ import annotations

from taskq.broker.stores.store import Consistency, Row, Statement, Store

_JOBS = "SELECT * FROM jobs WHERE queue = :queue ORDER BY id"
_EXECUTIONS = (
    "SELECT executions.* FROM executions JOIN jobs ON jobs.id = executions.job_id "
    "WHERE jobs.queue = :queue ORDER BY executions.id"
)


def job_rows(store: Store, queue: str) -> dict[int, Row]:
    """Every job of ``queue`` as stored, by id."""
    rows = store.query(Statement(_JOBS, {"queue": queue}), consistency=Consistency.LINEARIZABLE)
    return {int(row["id"]): row for row in rows}


def execution_rows(store: Store, queue: str) -> list[Row]:
    """Every execution (attempt) of the jobs of ``queue``, oldest first."""
    return store.query(
        Statement(_EXECUTIONS, {"queue": queue}), consistency=Consistency.LINEARIZABLE
    )
