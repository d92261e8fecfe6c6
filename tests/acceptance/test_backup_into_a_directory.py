"""``taskq backup DIR/`` and ``taskq restore DIR/``, as ``cp`` takes a directory: one line that
says it is a directory and what to name instead, exit 2, nothing made."""

from __future__ import annotations

import re
from pathlib import Path

from taskq.broker.client.connect import open_store
from tests.support.cli_runs import one_error_line, taskq


def test_a_backup_into_a_directory_asks_for_a_file_in_it(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'taskq.db'}"
    open_store(url).close()
    backups = tmp_path / "backups"
    backups.mkdir()
    ran = taskq("backup", f"{backups}/", store=url)
    line = one_error_line(ran, 2, f"{backups}/ is a directory: name the backup file to make")
    # A file named by the day, e.g. taskq-2026-05-01.db (the day may turn meanwhile).
    assert re.search(rf"e\.g\. {re.escape(str(backups))}/taskq-\d{{4}}-\d\d-\d\d\.db$", line)
    assert list(backups.iterdir()) == []


def test_a_restore_from_a_directory_asks_for_the_file_in_it(tmp_path: Path) -> None:
    restored = tmp_path / "restored.db"
    ran = taskq("restore", str(tmp_path), store=f"sqlite://{restored}")
    one_error_line(
        ran, 2, f"{tmp_path} is a directory: name the file in it that 'taskq backup' made"
    )
    assert not restored.exists()
