"""Backing a store up into one SQLite file, and restoring such a file into a new store.

Both stores back up the same way in effect: a copy of the database as of one
commit, taken while workers go on writing (the embedded store through
SQLite's online backup, a cluster through rqlite's ``/db/backup``). The copy
is written beside the file asked for, checked whole (integrity, a taskq
schema this taskq knows) and only then given its name, which must be new.

A restore checks the file the same way before anything is written, and goes
only into a new store: a SQLite file that does not exist yet, or a cluster
that holds nothing (``/db/load`` replaces a cluster's whole database, so a
cluster holding anything is refused). The restored store keeps the backup's
schema version; the first process that writes to it migrates it as usual.

Each step is told to ``on_progress`` as one event (a dict with ``event``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from taskq import errors
from taskq.broker.client.connect import open_store
from taskq.broker.ops import backups
from taskq.broker.ops.backups import StoreSummary
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import SqliteTarget, mask_password, parse_store_url
from taskq.broker.stores.wal_watch import commit_mark_path

Progress = Callable[[dict[str, Any]], None]
_SQLITE_HEADER = b"SQLite format 3\x00"


def backup(file: str | Path, url: str, *, on_progress: Progress | None = None) -> StoreSummary:
    """Back the store at ``url`` up into the new file ``file``; what the backup holds."""
    tell = on_progress or _ignore
    destination = Path(file).expanduser()
    _refuse_taken(destination, "a backup goes to a new file: remove it or name another")
    started = time.monotonic()
    store = open_store(url, migrate=False, read_only=True)
    try:
        tell({"event": "backup_started", "store": store.url, "file": str(destination)})
        with _staging(destination.parent, destination.name) as staging:
            size = _copy_out(store, staging, tell)
            tell({"event": "backup_copied", "bytes": size})
            summary = _checked(staging, str(destination), taken_now=True)
            try:
                os.link(staging, destination)
            except FileExistsError:
                raise errors.BackupInvalid(
                    f"{destination} appeared meanwhile; it is left as it is"
                ) from None
    finally:
        store.close()
    size = destination.stat().st_size
    _done(tell, "backup_done", summary, started, file=str(destination), bytes=size)
    return summary


def restore(file: str | Path, url: str, *, on_progress: Progress | None = None) -> StoreSummary:
    """Restore the backup ``file`` into the new store at ``url``; what it now holds."""
    tell = on_progress or _ignore
    source = Path(file).expanduser()
    _check_file(source)
    target = parse_store_url(url)
    started = time.monotonic()
    if isinstance(target, SqliteTarget):
        summary = _restore_file(source, target.path, url, tell)
    else:
        summary = _restore_cluster(source, url, tell)
    _done(tell, "restore_done", summary, started, store=mask_password(url))
    return summary


def _tell_started(tell: Progress, source: Path, url: str) -> None:
    # Told once the target is known to be new: a refused restore says only why.
    tell({"event": "restore_started", "file": str(source), "store": mask_password(url)})


def _restore_file(source: Path, path: Path, url: str, tell: Progress) -> StoreSummary:
    for taken in (path, _wal_of(path)):
        if taken.exists():
            raise errors.StoreNotEmpty(
                f"{mask_password(url)}: {taken} exists: a restore makes a new file; "
                "nothing was changed"
            )
    if not path.parent.is_dir():
        raise errors.ConfigError(f"SQLite store {path}: directory {path.parent} does not exist")
    _tell_started(tell, source, url)
    with _staging(path.parent, path.name) as staging:
        summary = _staged(source, staging, tell)
        try:
            os.link(staging, path)
        except FileExistsError:
            raise errors.StoreNotEmpty(
                f"{mask_password(url)}: {path} appeared meanwhile; nothing was changed"
            ) from None
    return summary


def _restore_cluster(source: Path, url: str, tell: Progress) -> StoreSummary:
    from taskq.broker.stores import rqlite_backup
    from taskq.broker.stores.rqlite_store import RqliteStore

    store = open_store(url, migrate=False)
    assert isinstance(store, RqliteStore)
    try:
        backups.check_empty(store)
        _tell_started(tell, source, url)
        with tempfile.TemporaryDirectory(prefix="taskq-restore-") as folder:
            staging = Path(folder) / source.name
            summary = _staged(source, staging, tell)
            backups.check_empty(store)  # again, just before: nothing came meanwhile
            tell({"event": "restore_loading", "bytes": staging.stat().st_size})
            rqlite_backup.load_backup(store, staging)
        loaded = backups.summarize(store)
        if loaded != summary:
            raise errors.StoreError(
                f"{store.url} took the file but reads back {loaded.describe()}, "
                f"not {summary.describe()}"
            )
    finally:
        store.close()
    return summary


def _staged(source: Path, staging: Path, tell: Progress) -> StoreSummary:
    """Copy the backup to ``staging`` and check it there (the backup itself stays untouched);
    the source's live workers are marked lost in the copy."""
    shutil.copyfile(source, staging)
    summary = _checked(staging, str(source))
    store = SqliteStore(staging)
    try:
        lost = backups.mark_workers_lost(store)
    finally:
        store.close()
    tell(
        {"event": "restore_checked", "file": str(source), "workers_lost": lost, **_fields(summary)}
    )
    return summary


def _copy_out(store: Store, staging: Path, tell: Progress) -> int:
    if isinstance(store, SqliteStore):
        staging.unlink()  # SQLite makes the file itself
        store.copy_to(staging)
        return staging.stat().st_size
    from taskq.broker.stores import rqlite_backup
    from taskq.broker.stores.rqlite_store import RqliteStore

    assert isinstance(store, RqliteStore)
    staging.unlink()
    return rqlite_backup.download_backup(
        store, staging, on_bytes=lambda n: tell({"event": "backup_progress", "bytes": n})
    )


def _checked(path: Path, name: str, *, taken_now: bool = False) -> StoreSummary:
    """The summary of the SQLite file at ``path``, checked as a taskq backup named ``name``
    (``taken_now``: just copied from a live store)."""
    try:
        store = SqliteStore(path)
    except errors.StoreCorrupt as exc:
        raise errors.BackupInvalid(f"{name} is not a SQLite database ({exc})") from exc
    try:
        return backups.check_backup(store, name, taken_now=taken_now)
    finally:
        store.close()


def _check_file(source: Path) -> None:
    if not source.is_file():
        raise errors.BackupInvalid(f"{source}: no such file")
    with source.open("rb") as head:
        if head.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
            raise errors.BackupInvalid(
                f"{source} is not a SQLite database (a taskq backup is one SQLite file)"
            )
    wal = _wal_of(source)
    if wal.exists() and wal.stat().st_size > 0:
        raise errors.BackupInvalid(
            f"{source} has a write-ahead log beside it ({wal.name}): it is a store in use, "
            "not a backup; take one with 'taskq backup'"
        )


def _refuse_taken(path: Path, why: str) -> None:
    if path.exists():
        raise errors.BackupInvalid(f"{path} exists: {why}")
    if not path.parent.is_dir():
        # A usage error, as a store's path in a missing directory is (see _restore_file).
        raise errors.ConfigError(f"{path}: directory {path.parent} does not exist")


@contextlib.contextmanager
def _staging(folder: Path, name: str) -> Iterator[Path]:
    """A new file beside the final one, removed (with any SQLite sidecars) on the way out."""
    handle, raw = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    os.close(handle)
    staging = Path(raw)
    # mkstemp makes the file private; the store or backup gets the modes SQLite would give it.
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o666 & ~umask)
    try:
        yield staging
    finally:
        for leftover in (
            staging,
            _wal_of(staging),
            Path(f"{staging}-shm"),
            commit_mark_path(staging),
        ):
            leftover.unlink(missing_ok=True)


def _wal_of(path: Path) -> Path:
    return Path(f"{path}-wal")


def _fields(summary: StoreSummary) -> dict[str, Any]:
    return {
        "schema_version": summary.schema_version,
        # This taskq's own: a script tells from the two that 'taskq migrate' is due, as the
        # human line of 'taskq restore' says when the store's is behind.
        "known_version": summary.known_version,
        "jobs": summary.total_jobs,
        "jobs_by_state": summary.jobs,
        "workers": summary.workers,
    }


def _done(tell: Progress, event: str, summary: StoreSummary, started: float, **where: Any) -> None:
    seconds = round(time.monotonic() - started, 3)
    tell({"event": event, **where, **_fields(summary), "seconds": seconds})


def _ignore(event: dict[str, Any]) -> None:
    """No one listens for progress."""
