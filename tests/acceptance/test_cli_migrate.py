"""``taskq migrate``: an operator checks for pending migrations and applies them on purpose."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from tests.support import cli_runs
from tests.support.cli_runs import one_error_line
from tests.support.older_stores import older_store


def test_pending_migrations_are_checked_then_applied_on_purpose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "taskq.db"
    url = f"sqlite://{path}"
    newest = older_store(path, monkeypatch)
    before = path.read_bytes()

    pending = cli_runs.taskq("migrate", "--check", store=url)
    one_error_line(pending, 1, f"schema version 1, this taskq uses {newest}", "taskq migrate")
    # Named as their files are, for an operator to read before applying them.
    assert "(pending: 0002_" in pending.err
    assert f"{newest:04d}_" in pending.err
    assert path.read_bytes() == before  # a check writes nothing
    # A command that only reads says how to migrate on purpose.
    one_error_line(cli_runs.taskq("jobs", store=url), 1, "taskq migrate")

    applied = cli_runs.ok("migrate", store=url)
    assert applied.out == f"{url} migrated from schema version 1 to {newest}\n"
    assert cli_runs.ok("migrate", "--check", store=url).out == (
        f"{url} has schema version {newest}, this taskq's: no migration pending\n"
    )
    again = cli_runs.ok("migrate", "--json", store=url).json()
    assert (again["from_version"], again["schema_version"]) == (newest, newest)
    assert cli_runs.ok("jobs", store=url).code == 0


def test_a_new_store_is_set_up_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    url = f"sqlite://{path}"
    one_error_line(cli_runs.taskq("migrate", "--check", store=url), 1, "holds no taskq data")
    assert not path.exists()
    newest = migrations.newest_version()
    assert cli_runs.ok("migrate", store=url).out == f"{url} set up at schema version {newest}\n"


def test_a_newer_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "taskq.db"
    url = f"sqlite://{path}"
    open_store(url).close()
    newest = migrations.newest_version()
    # What a newer taskq's migration leaves: its version recorded.
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "INSERT INTO taskq_migrations (version, name, applied_at) VALUES (?, ?, 0)",
            (newest + 1, "from_the_future"),
        )
    before = path.read_bytes()
    for args in (["migrate"], ["migrate", "--check"]):
        ran = cli_runs.taskq(*args, store=url)
        one_error_line(ran, 1, f"schema version {newest + 1}, newer than this taskq knows")
    assert path.read_bytes() == before


def test_a_taskq_serve_is_refused(tmp_path: Path) -> None:
    ran = cli_runs.taskq("migrate", store="http://127.0.0.1:9")
    one_error_line(ran, 2, "taskq migrate needs the store itself")
