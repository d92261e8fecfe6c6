"""Bringing a store's schema up to date, once, even when processes race.

Migrations are ``sql/migrations/NNNN_name.sql`` files applied in order. Each
is applied as one atomic batch whose first statement records its version in
``taskq_migrations`` (primary key). When two processes start together, the
second one's batch fails on that key before any DDL runs and rolls back whole:
it then knows the migration is in place. ``sql/schema.sql`` is what all
migrations together produce; a test holds the two in step.

Commands that only read never migrate: :func:`check` reads the applied
versions and says when the schema is behind, writing nothing.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgspec

from taskq import errors
from taskq.broker.ops import queries
from taskq.broker.ops.plan import Op, Read
from taskq.broker.stores.store import Consistency, Statement, Store

_UNKNOWN_OUTCOME_TRIES = 3
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class Migration(msgspec.Struct, frozen=True):
    version: int
    name: str
    statements: tuple[str, ...]


def split_statements(script: str) -> list[str]:
    """Split an SQL script into statements, respecting strings and trigger bodies."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = _strip_comments(pending).strip().rstrip(";").strip()
            if statement:
                statements.append(statement)
            pending = ""
    if _strip_comments(pending).strip():
        raise ValueError(f"unterminated SQL statement: {pending.strip()[:80]!r}")
    return statements


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def _migration_files() -> Iterator[Path]:
    return (queries.SQL_FOLDER / "migrations").iterdir()


def newest_version() -> int:
    """The version of the newest migration shipped with this taskq, from the files' names alone."""
    names = (_FILE_NAME.match(entry.name) for entry in _migration_files())
    return max((int(match.group(1)) for match in names if match), default=0)


def load_migrations() -> list[Migration]:
    """Every migration shipped with this taskq, in version order."""
    found: list[Migration] = []
    for entry in _migration_files():
        match = _FILE_NAME.match(entry.name)
        if not match:
            continue
        found.append(
            Migration(
                version=int(match.group(1)),
                name=match.group(2),
                statements=tuple(split_statements(entry.read_text(encoding="utf-8"))),
            )
        )
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(found) + 1)):
        raise errors.MigrationError(f"migration versions are not 1..N without gaps: {versions}")
    return found


def schema_version() -> Op[int]:
    """The newest migration applied, as any node's own copy has it (0: none yet).

    Read at no consistency: a cluster without a leader still has a version to show.
    """
    rows = yield Read(Statement(queries.query("migration_list")), Consistency.NONE)
    return max((int(row["version"]) for row in rows), default=0)


def applied_versions(
    store: Store, *, consistency: Consistency = Consistency.LINEARIZABLE
) -> set[int]:
    """The versions applied to ``store``, read at ``consistency``."""
    rows = store.query(Statement(queries.query("migration_list")), consistency=consistency)
    return {int(row["version"]) for row in rows}


def _versions_if_any(
    store: Store, *, consistency: Consistency = Consistency.LINEARIZABLE
) -> set[int]:
    """The versions applied to ``store``; none if it has no versions' table yet."""
    try:
        return applied_versions(store, consistency=consistency)
    except errors.StatementError as exc:
        if "no such table" not in str(exc):
            raise
        return set()  # nothing was ever written to this store


def check(store: Store) -> None:
    """Raise :class:`taskq.errors.SchemaBehind` unless ``store`` is up to date; write nothing."""
    newest = newest_version()
    done = _versions_if_any(store, consistency=Consistency.WEAK)
    if not done:
        raise errors.SchemaBehind(
            f"{store.url} holds no taskq data yet: a command that only reads does not set it "
            "up; submit a job or start taskq-worker first"
        )
    _refuse_newer(store, done, newest)
    if not done.issuperset(range(1, newest + 1)):
        raise errors.SchemaBehind(
            f"{store.url} has schema version {max(done)}, this taskq uses {newest} "
            f"(pending: {', '.join(_pending(done))}): a command that only reads does not "
            "migrate it; back it up (taskq backup FILE), then run a writing command once: "
            "taskq migrate, which does nothing else, or taskq-worker"
        )


def _pending(done: set[int]) -> list[str]:
    """The files' names of the migrations shipped and not in ``done``, in order
    (``0016_worker_policy``): what an operator can read before applying them."""
    names = (_FILE_NAME.match(entry.name) for entry in _migration_files())
    return sorted(
        f"{match.group(1)}_{match.group(2)}"
        for match in names
        if match and int(match.group(1)) not in done
    )


def _refuse_newer(store: Store, done: set[int], newest: int) -> None:
    if done and max(done) > newest:
        raise errors.SchemaNewer(
            f"{store.url} has schema version {max(done)}, newer than this taskq knows "
            f"({newest}): upgrade taskq to use it; nothing was changed"
        )


def migrate(store: Store) -> list[int]:
    """Apply every pending migration; return the versions this call applied.

    Safe to call from many processes at once: each migration is applied by
    exactly one of them, and the others see it as already applied.
    """
    # Up to date, as a store is at almost every start of a worker or a client:
    # one read, and no migration's file read and parsed, nor a write (on rqlite
    # a Raft round) to make sure the versions' table exists.
    newest = newest_version()
    done = _versions_if_any(store)
    _refuse_newer(store, done, newest)
    if done.issuperset(range(1, newest + 1)):
        return []
    migrations = load_migrations()
    store.execute([Statement(queries.query("migration_table_create"))], idempotent=True)
    done = applied_versions(store)
    _refuse_newer(store, done, migrations[-1].version if migrations else 0)
    applied: list[int] = []
    for migration in migrations:
        if migration.version in done:
            continue
        if _apply(store, migration):
            applied.append(migration.version)
    return applied


def _apply(store: Store, migration: Migration) -> bool:
    """Apply one migration; False when another process applied it first."""
    record = Statement(
        queries.query("migration_record"),
        {"version": migration.version, "name": migration.name},
    )
    batch = [record, *(Statement(sql) for sql in migration.statements)]
    label = f"{migration.version:04d}_{migration.name}"
    for _ in range(_UNKNOWN_OUTCOME_TRIES):
        try:
            store.execute(batch)
        except errors.ConstraintViolation as exc:
            if exc.index == 0:
                return False
            raise errors.MigrationError(f"migration {label} failed: {exc}") from exc
        except errors.StatementError as exc:
            raise errors.MigrationError(f"migration {label} failed: {exc}") from exc
        except errors.OutcomeUnknown:
            # The batch may have committed; its version row says whether it did.
            if migration.version in applied_versions(store):
                return True
            continue
        return True
    raise errors.MigrationError(f"migration {label}: the store's answer stayed unknown")
