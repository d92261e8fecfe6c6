"""How the embedded store fails: one taskq error per cause, in SQLite's words, nothing half-written.

A full disk and a read-only mount are real: a small tmpfs of the test's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Statement
from tests.support.damaged_store import damage_table, not_a_database
from tests.support.small_filesystem import small_filesystem

CREATE = Statement("CREATE TABLE t (n INTEGER, pad TEXT)")
COUNT = Statement("SELECT count(*) AS n FROM t")


def _insert(rows: int) -> list[Statement]:
    # Rows of incompressible size, so that a batch needs pages of its own.
    return [
        Statement("INSERT INTO t VALUES (:n, hex(randomblob(2000)))", {"n": n}) for n in range(rows)
    ]


def test_a_full_disk_is_store_full_in_sqlites_words_and_nothing_is_applied(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        store = SqliteStore(fs.path / "taskq.db")
        try:
            store.execute([CREATE])
            fs.fill()
            with pytest.raises(errors.StoreFull) as full:
                store.execute(_insert(200))
            # Not "cannot rollback - no transaction is active": the cause itself.
            assert "database or disk is full" in str(full.value)
            assert str(fs.path / "taskq.db") in str(full.value)
            assert isinstance(full.value, errors.StoreUnavailable)  # safe to retry
            assert store.query(COUNT) == [{"n": 0}]

            fs.free()
            store.execute(_insert(200))
            assert store.query(COUNT) == [{"n": 200}]
        finally:
            store.close()


def test_a_store_on_a_read_only_mount_is_store_read_only(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs") as fs:
        open_store(f"sqlite://{fs.path / 'taskq.db'}").close()
        fs.remount_read_only()
        with pytest.raises(errors.StoreReadOnly, match="read-only"):
            open_store(f"sqlite://{fs.path / 'taskq.db'}")


def test_a_file_that_is_no_database_is_store_corrupt_at_once(tmp_path: Path) -> None:
    path = tmp_path / "taskq.db"
    not_a_database(path)
    with pytest.raises(errors.StoreCorrupt, match="file is not a database"):
        SqliteStore(path)


def test_a_damaged_table_is_store_corrupt_when_read(tmp_path: Path) -> None:
    path = tmp_path / "taskq.db"
    open_store(f"sqlite://{path}").close()
    damage_table(path, "workers")
    store = open_store(f"sqlite://{path}")  # the migrations' own table is intact
    try:
        with pytest.raises(errors.StoreCorrupt, match="malformed"):
            store.query(Statement("SELECT * FROM workers"))
    finally:
        store.close()


def test_a_file_the_process_may_not_open_is_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, whom file modes do not stop: a directory where the
    # file should be makes SQLite fail to open it, and the modes are made to
    # say no, as they would to anyone else.
    (tmp_path / "taskq.db").mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(errors.StorePermissionDenied, match="permission denied"):
        SqliteStore(tmp_path / "taskq.db")


def test_a_missing_directory_is_a_config_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    with pytest.raises(errors.ConfigError, match=str(missing)):
        open_store(f"sqlite://{missing / 'taskq.db'}")
    with pytest.raises(errors.ConfigError, match=str(missing)):
        open_store(f"sqlite://{missing / 'taskq.db'}", read_only=True)
    assert not (tmp_path / "no").exists()


def test_the_default_store_directory_is_made_to_write_but_not_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("TASKQ_STORE", raising=False)
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setenv("TASKQ_CONFIG", str(tmp_path / "empty.toml"))
    with pytest.raises(errors.SchemaBehind, match="holds no taskq data yet"):
        open_store(read_only=True)
    assert not (tmp_path / "data").exists()
    open_store().close()
    assert (tmp_path / "data" / "taskq" / "taskq.db").is_file()


def test_opening_to_read_checks_the_schema_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "taskq.db"
    with pytest.raises(errors.SchemaBehind, match="holds no taskq data yet"):
        open_store(f"sqlite://{path}", read_only=True)
    assert not path.exists()

    # A store an older taskq made: it knew only the first migration.
    shipped = migrations.load_migrations()
    with monkeypatch.context() as older:
        older.setattr(migrations, "load_migrations", lambda: shipped[:1])
        open_store(f"sqlite://{path}").close()
    before = path.read_bytes()
    with pytest.raises(
        errors.SchemaBehind, match=f"schema version 1, this taskq uses {len(shipped)}"
    ) as behind:
        open_store(f"sqlite://{path}", read_only=True)
    assert path.read_bytes() == before
    # Migrating is the step docs/upgrades.md says to take a backup before.
    assert "back it up (taskq backup FILE), then run a writing command" in str(behind.value)

    open_store(f"sqlite://{path}").close()  # a writer brings it up to date
    open_store(f"sqlite://{path}", read_only=True).close()
