"""Stores an older taskq made, that knew only the first migration: for ``taskq migrate`` and
``taskq restore`` of what came before this taskq."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from tests.support.cli_runs import ok


def older_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Make ``path`` a store at schema version 1; this taskq's newest version."""
    shipped = migrations.load_migrations()
    with monkeypatch.context() as older:
        older.setattr(migrations, "load_migrations", lambda: shipped[:1])
        open_store(f"sqlite://{path}").close()
    return len(shipped)


def older_backup(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """A backup (``taskq backup``) of a store at schema version 1, in ``folder``; this
    taskq's newest version."""
    newest = older_store(folder / "old.db", monkeypatch)
    backup = folder / "old-backup.db"
    ok("backup", str(backup), store=f"sqlite://{folder / 'old.db'}")
    return backup, newest
