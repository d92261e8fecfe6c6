"""``taskq restore --json`` says this taskq's schema version beside the restored store's,
so a script can tell, as the human line says, that ``taskq migrate`` is due."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.ops import migrations
from tests.support.cli_runs import ok
from tests.support.older_stores import older_backup


def _done(out: str) -> dict[str, Any]:
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["event"] == "restore_done"
    return events[-1]


def test_a_restore_of_an_older_schema_says_both_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup, newest = older_backup(tmp_path, monkeypatch)
    restored = f"sqlite://{tmp_path / 'restored.db'}"

    done = _done(ok("restore", str(backup), "--json", store=restored).out)
    assert (done["schema_version"], done["known_version"]) == (1, newest)


def test_a_restore_of_this_taskqs_schema_says_the_same_version_twice(tmp_path: Path) -> None:
    source = f"sqlite://{tmp_path / 'now.db'}"
    open_store(source).close()
    backup = tmp_path / "now-backup.db"
    ok("backup", str(backup), store=source)
    restored = f"sqlite://{tmp_path / 'restored.db'}"

    done = _done(ok("restore", str(backup), "--json", store=restored).out)
    assert done["schema_version"] == done["known_version"] == migrations.newest_version()
