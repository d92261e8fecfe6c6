"""Which store a command talks to, and how: to write, or only to read.

The store is picked as everywhere in taskq: ``--store``, ``TASKQ_STORE``,
the config file, then the embedded default. A command rides out a leader
election with the same failover tries as the Python client (the URL's
``retries``, about 11.5 s of pauses by default), but a node that does not
answer one request within :data:`CLI_TIMEOUT_SECONDS` is given up on
sooner than a worker would, unless the URL sets a ``timeout`` of its own. A
cluster whose every node refuses the connection is given up on at once.

A command that only reads opens the store without writing anything: no
migration (a schema that is behind is said so), no file created, and on a
cluster without a leader its reads come from a surviving node's own copy,
with a note on stderr that they may be stale.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from urllib.parse import parse_qsl

from taskq.broker.client.client import Client
from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import (
    RqliteTarget,
    parse_store_url,
    resolve_store_url,
)
from taskq.cli import output
from taskq.config import load_config

CLI_TIMEOUT_SECONDS = 5


def store_url(args: argparse.Namespace) -> str:
    """The URL of the store this command uses, as the user named it (checked)."""
    configured = load_config(args.config).store_url if args.store is None else None
    url = resolve_store_url(args.store, configured)
    parse_store_url(url)
    return url


def bounded(url: str) -> str:
    """``url`` with the command's shorter request timeout, unless it sets its own."""
    if not isinstance(parse_store_url(url), RqliteTarget):
        return url
    base, _, query = url.partition("?")
    if "timeout" in dict(parse_qsl(query, keep_blank_values=True)):
        return url
    return f"{base}?{'&'.join(part for part in (query, f'timeout={CLI_TIMEOUT_SECONDS}') if part)}"


def client(
    args: argparse.Namespace, *, migrate: bool = True, read_only: bool = False
) -> AbstractContextManager[Client]:
    """A client over the command's store, closed on the way out.

    ``read_only`` for a command that only reads (see the module's docstring);
    ``migrate=False`` leaves the schema alone.
    """
    return client_at(store_url(args), migrate=migrate, read_only=read_only)


@contextmanager
def client_at(url: str, *, migrate: bool = True, read_only: bool = False) -> Iterator[Client]:
    """A client over the store at ``url``, opened as :func:`opened_url` does."""
    with opened_url(url, migrate=migrate, read_only=read_only) as store:
        yield Client(store=store, import_names=False)


@contextmanager
def opened_url(url: str, *, migrate: bool = True, read_only: bool = False) -> Iterator[Store]:
    """The store at ``url`` with the command's bounds, closed on the way out."""
    store = open_store(
        bounded(url),
        migrate=migrate,
        read_only=read_only,
        on_stale_read=_note_stale if read_only else None,
    )
    try:
        yield store
    finally:
        store.close()


def _note_stale(node: str) -> None:
    output.warn(
        f"taskq: note: the cluster has no leader; read from {node}'s own copy, which may be stale"
    )
