"""What a backup holds, whether it is a taskq store, and whether a store is empty.

A backup is a taskq store in one SQLite file. Before it is restored it is
checked whole (``PRAGMA integrity_check``), it must hold the record of its
migrations (``taskq_migrations``), and its schema must be one this taskq
knows. A restore goes only into a store that holds nothing at all: a store
with any table (a taskq schema, jobs, registered workers, or anyone else's
data) is refused, and nothing is written to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from taskq import errors
from taskq.broker.ops import migrations, queries
from taskq.broker.stores.store import Consistency, Statement, Store

_MIGRATIONS_TABLE = "taskq_migrations"
_NAMED_TABLES = 5


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """A taskq store at a glance: its schema version, its jobs by state, its live workers."""

    schema_version: int
    jobs: dict[str, int] = field(default_factory=dict)
    workers: int = 0
    known_version: int = 0
    """The newest schema this taskq knows: a restored store behind it waits for a migration,
    which the restore does not make (the store stays the backup's until asked)."""

    @property
    def behind(self) -> bool:
        """Whether this taskq would migrate the store (commands that only read refuse it)."""
        return self.schema_version < self.known_version

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())

    def describe(self) -> str:
        return (
            f"schema version {self.schema_version}, {self.total_jobs} job(s), "
            f"{self.workers} worker(s) registered"
        )


def tables(store: Store) -> list[str]:
    """The names of the store's tables (SQLite's own left out), read linearizably."""
    statement = Statement(queries.query("backup_tables"))
    rows = store.query(statement, consistency=Consistency.LINEARIZABLE)
    return [str(row["name"]) for row in rows]


def summarize(store: Store) -> StoreSummary:
    """The summary of a taskq store (its schema may be behind this taskq's)."""
    versions = migrations.applied_versions(store)
    read = Consistency.LINEARIZABLE
    jobs = store.query(Statement(queries.query("backup_jobs_by_state")), consistency=read)
    workers = store.query(Statement(queries.query("backup_workers_registered")), consistency=read)
    return StoreSummary(
        schema_version=max(versions, default=0),
        jobs={str(row["state"]): int(row["n"]) for row in jobs},
        workers=int(workers[0]["n"]) if workers else 0,
        known_version=migrations.newest_version(),
    )


def mark_workers_lost(store: Store) -> int:
    """Mark the live workers a store being restored lists as lost; how many.

    The copy's workers served the source: none is heard on the restored store
    until it starts there, and its heartbeat then makes it live again.
    """
    [result] = store.execute([Statement(queries.query("restore_workers_lost"))])
    return result.rows_affected


def check_backup(store: Store, name: str, *, taken_now: bool = False) -> StoreSummary:
    """Check that ``store`` (a backup file, opened) is a sound taskq store; its summary.

    Raises :class:`taskq.errors.BackupInvalid` naming ``name`` and what is wrong;
    ``taken_now``: the copy a backup just made, of a live store (the advice differs).
    """
    try:
        verdict = store.query(Statement(queries.query("backup_integrity_check")))
    except errors.StoreCorrupt as exc:
        raise errors.BackupInvalid(f"{name} is not a SQLite database: {exc}") from exc
    problems = [str(next(iter(row.values()))) for row in verdict]
    if problems != ["ok"]:
        raise errors.BackupInvalid(
            f"{name} is damaged (SQLite's integrity check: {'; '.join(problems[:3])})"
        )
    found = tables(store)
    if _MIGRATIONS_TABLE not in found:
        raise errors.BackupInvalid(
            f"{name} is a SQLite database but not a taskq store: it has no {_MIGRATIONS_TABLE} "
            f"table (it holds {_listed(found)})"
        )
    summary = summarize(store)
    newest = migrations.newest_version()
    if summary.schema_version > newest:
        advice = (
            "a newer taskq migrated the store: take its backups with that taskq"
            if taken_now
            else "restore it with a taskq that knows its schema"
        )
        raise errors.BackupInvalid(
            f"{name} has schema version {summary.schema_version}, newer than this taskq "
            f"knows ({newest}): {advice}"
        )
    return summary


def check_empty(store: Store) -> None:
    """Refuse a store that holds anything: :class:`taskq.errors.StoreNotEmpty` says what."""
    found = tables(store)
    if not found:
        return
    if _MIGRATIONS_TABLE in found:
        held = f"a taskq store ({summarize(store).describe()})"
    else:
        held = _listed(found)
    raise errors.StoreNotEmpty(
        f"{store.url} already holds {held}: a restore goes only into a new, empty store; "
        "nothing was changed"
    )


def _listed(names: list[str]) -> str:
    if not names:
        return "no tables"
    shown = ", ".join(names[:_NAMED_TABLES])
    more = f" and {len(names) - _NAMED_TABLES} more" if len(names) > _NAMED_TABLES else ""
    return f"{len(names)} table(s): {shown}{more}"
