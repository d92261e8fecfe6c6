"""Opening a store by URL, with its schema brought up to date."""

from __future__ import annotations

from pathlib import Path

from taskq.broker import migrations
from taskq.broker.rqlite_store import RqliteStore
from taskq.broker.sqlite_store import SqliteOptions, SqliteStore
from taskq.broker.store import Store
from taskq.broker.store_url import SqliteTarget, parse_store_url, resolve_store_url
from taskq.config import load_config


def open_store(
    url: str | None = None, *, config_path: str | Path | None = None, migrate: bool = True
) -> Store:
    """Open the store named by ``url`` (else ``TASKQ_STORE``, config, default).

    With ``migrate`` (the default) the schema is brought up to date first;
    doing so concurrently from several processes is safe.
    """
    configured = load_config(config_path).store_url if url is None else None
    resolved = resolve_store_url(url, configured)
    target = parse_store_url(resolved)
    store: Store
    if isinstance(target, SqliteTarget):
        store = SqliteStore(
            target.path,
            SqliteOptions(busy_timeout_ms=target.busy_timeout_ms, synchronous=target.synchronous),
        )
    else:
        store = RqliteStore(target, display_url=resolved)
    if migrate:
        try:
            migrations.migrate(store)
        except BaseException:
            store.close()
            raise
    return store
