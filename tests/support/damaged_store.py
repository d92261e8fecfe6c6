"""Store files damaged on purpose, to see how taskq reports them."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path


def damage_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` in a closed store file.

    The file stays a database (its first page and the other tables are
    intact), so it opens; reading ``table`` finds the page malformed.
    """
    with closing(sqlite3.connect(path)) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xff" * page_size)


def not_a_database(path: Path) -> None:
    """Write a file at ``path`` that is no SQLite database at all."""
    path.write_bytes(b"this is a text file, not a database\n" * 200)
