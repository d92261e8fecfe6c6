"""Opening a store by URL, with its schema brought up to date (or, to read, checked)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from taskq import errors
from taskq.broker.ops import migrations
from taskq.broker.stores.sqlite_store import SqliteOptions, SqliteStore
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import (
    SqliteTarget,
    default_store_url,
    is_http_url,
    parse_store_url,
    resolve_store_url,
)
from taskq.config import load_config


def chosen_store_url(url: str | None, config_path: str | Path | None = None) -> str:
    """The URL a command or client is to use: ``url`` when given, else ``TASKQ_STORE``, the
    config file's (read only when ``url`` is not given), then the default store's."""
    configured = load_config(config_path).store_url if url is None else None
    return resolve_store_url(url, configured)


def client_url(url: str | None, config_path: str | Path | None = None) -> str:
    """The URL a client is to use (:func:`chosen_store_url`): a taskq serve's, or a store's,
    checked, so that a malformed one is refused listing a taskq serve's among the URLs a
    client takes (:class:`taskq.errors.ConfigError`)."""
    chosen = chosen_store_url(url, config_path)
    if not is_http_url(chosen):
        parse_store_url(chosen, served_too=True)
    return chosen


def open_store(
    url: str | None = None,
    *,
    config_path: str | Path | None = None,
    migrate: bool = True,
    read_only: bool = False,
    on_stale_read: Callable[[str], None] | None = None,
) -> Store:
    """Open the store named by ``url`` (else ``TASKQ_STORE``, config, default).

    With ``migrate`` (the default) the schema is brought up to date first;
    doing so concurrently from several processes is safe. ``read_only``
    promises that the caller only reads: nothing is written, not even the
    schema, which is checked instead (:class:`taskq.errors.SchemaBehind`
    when it is behind, or when the store holds nothing yet), and no SQLite
    file is created. ``migrate=False`` leaves the schema alone either way.

    A SQLite file goes only where its directory exists (else
    :class:`taskq.errors.ConfigError`), except the default store's, whose
    directory in the user's data directory is created when writing.
    ``on_stale_read`` lets a cluster without a leader answer reads from a
    node's own copy (see :class:`taskq.broker.stores.rqlite_store.RqliteStore`).
    """
    resolved = chosen_store_url(url, config_path)
    target = parse_store_url(resolved)
    store: Store
    if isinstance(target, SqliteTarget):
        _prepare_sqlite_path(target.path, resolved, read_only=read_only)
        store = SqliteStore(
            target.path,
            SqliteOptions(busy_timeout_ms=target.busy_timeout_ms, synchronous=target.synchronous),
        )
    else:
        # Imported for an rqlite URL only: its HTTP and TLS stack is most of the
        # import time of an embedded worker or client, which never use it.
        from taskq.broker.stores.rqlite_store import RqliteStore

        store = RqliteStore(target, display_url=resolved, on_stale_read=on_stale_read)
    if migrate:
        try:
            if read_only:
                migrations.check(store)
            else:
                migrations.migrate(store)
        except BaseException:
            store.close()
            raise
    return store


def _prepare_sqlite_path(path: Path, url: str, *, read_only: bool) -> None:
    """Create the default store's directory to write; refuse to read a file not there.

    Any other missing directory is the store's to refuse (a typo, most often).
    """
    if read_only:
        if not path.exists() and (path.parent.is_dir() or url == default_store_url()):
            raise errors.SchemaBehind(
                f"{url} holds no taskq data yet (there is no {path}): a command that only "
                "reads does not create it; submit a job or start taskq-worker first"
            )
    elif not path.parent.is_dir() and url == default_store_url():
        # Only a missing directory asks which store this is (the default's
        # path costs platformdirs' import, on the way to a worker's first job).
        path.parent.mkdir(parents=True, exist_ok=True)
