"""A backup an older taskq made, restored by this one: the restore says that the store waits
for ``taskq migrate``, rather than leave the next read command's refusal to tell it."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from tests.support.cli_runs import ok, one_error_line, taskq
from tests.support.older_stores import older_backup


def test_a_restore_of_an_older_schema_says_to_migrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup, newest = older_backup(tmp_path, monkeypatch)
    restored = f"sqlite://{tmp_path / 'restored.db'}"

    said = ok("restore", str(backup), store=restored).out.splitlines()
    assert said[-1] == (
        f"the restored store's schema version 1 is behind this taskq's ({newest}): "
        "'taskq migrate' brings it up to date; until then commands that only read refuse it"
    )
    one_error_line(taskq("jobs", store=restored), 1, "schema version 1")
    ok("migrate", store=restored)
    ok("jobs", store=restored)


def test_a_restore_of_this_taskqs_schema_says_nothing_more(tmp_path: Path) -> None:
    source = f"sqlite://{tmp_path / 'now.db'}"
    open_store(source).close()
    backup = tmp_path / "now-backup.db"
    ok("backup", str(backup), store=source)
    said = ok("restore", str(backup), store=f"sqlite://{tmp_path / 'restored.db'}").out
    assert said.splitlines()[-1].startswith("restored: ")
