"""Which store a command talks to, opened with bounds fit for a person waiting at a terminal.

The store is picked as everywhere in taskq: ``--store``, ``TASKQ_STORE``,
the config file, then the embedded default. A worker rides out a long
outage; a command should say within seconds that the store does not
answer. So an rqlite URL that sets no ``timeout`` or ``retries`` of its own
gets the shorter :data:`CLI_TIMEOUT_SECONDS` and :data:`CLI_RETRIES`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from urllib.parse import parse_qsl

from taskq.broker.connect import open_store
from taskq.broker.store import Store
from taskq.broker.store_url import RqliteTarget, parse_store_url, resolve_store_url
from taskq.config import load_config

CLI_TIMEOUT_SECONDS = 5
CLI_RETRIES = 2


def store_url(args: argparse.Namespace) -> str:
    """The URL of the store this command uses, as the user named it (checked)."""
    configured = load_config(args.config).store_url if args.store is None else None
    url = resolve_store_url(args.store, configured)
    parse_store_url(url)
    return url


def bounded(url: str) -> str:
    """``url`` with the command's short request timeout and retries, unless it sets its own."""
    if not isinstance(parse_store_url(url), RqliteTarget):
        return url
    base, _, query = url.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    extra = []
    if "timeout" not in options:
        extra.append(f"timeout={CLI_TIMEOUT_SECONDS}")
    if "retries" not in options:
        extra.append(f"retries={CLI_RETRIES}")
    return f"{base}?{'&'.join(part for part in (query, *extra) if part)}"


def opened(args: argparse.Namespace, *, migrate: bool = True) -> AbstractContextManager[Store]:
    """The command's store, closed on the way out; ``migrate`` brings its schema up to date."""
    return opened_url(store_url(args), migrate=migrate)


@contextmanager
def opened_url(url: str, *, migrate: bool = True) -> Iterator[Store]:
    """The store at ``url`` with the command's bounds, closed on the way out."""
    store = open_store(bounded(url), migrate=migrate)
    try:
        yield store
    finally:
        store.close()
