"""The embedded store's connection settings: what durability and WAL upkeep it runs with."""

from __future__ import annotations

from pathlib import Path

from taskq.broker.sqlite_store import SqliteStore
from taskq.broker.store import Statement


def _pragma(store: SqliteStore, name: str) -> object:
    (row,) = store.query(Statement(f"PRAGMA {name}", {}))
    return next(iter(row.values()))


def test_the_store_runs_in_wal_mode_with_full_sync_and_a_large_checkpoint_interval(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "synchronous") == 2  # FULL
        # Busy workers would otherwise copy the WAL back every few dozen commits.
        assert _pragma(store, "wal_autocheckpoint") == 10_000
    finally:
        store.close()
