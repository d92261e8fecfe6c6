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

The URL of a ``taskq serve`` (``http://`` or ``https://``) serves too: the
command's client then speaks HTTP, as ``taskq.Client(url)`` does, bearing
``TASKQ_TOKEN``, and the server alone opens the store (none of the above
applies). A server that cannot be reached is said so within
:data:`FIRST_CONTACT_SECONDS`, where a script's client would ride out a
restart for its 30 s; once reached, requests have the client's timeouts. A
command that needs the store itself refuses it, naming itself.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from urllib.parse import parse_qsl

from taskq import errors
from taskq.broker.client.client import Client
from taskq.broker.client.connect import chosen_store_url, client_url, open_store
from taskq.broker.client.http_requests import TOKEN_ENV
from taskq.broker.stores.store import Store
from taskq.broker.stores.store_url import (
    RqliteTarget,
    is_http_url,
    mask_password,
    parse_store_url,
)
from taskq.cli import output
from taskq.config import config_file_read

CLI_TIMEOUT_SECONDS = 5
# How long a command tries to reach a taskq serve before it says it cannot: a server
# starting (or restarting) answers in about 0.6 s, and a person at the prompt would rather
# hear of a wrong port or a server that is down in seconds than after the client's 30.
FIRST_CONTACT_SECONDS = 3.0


def named_url(args: argparse.Namespace) -> str:
    """The URL this command uses, as the user named it: a store's (checked), or a taskq
    serve's."""
    return client_url(args.store, args.config)


def store_url(args: argparse.Namespace) -> str:
    """The URL of the store itself, for a command that needs it: a taskq serve's is refused
    (:class:`taskq.errors.ConfigError`, exit 2) before anything is done."""
    url = chosen_store_url(args.store, args.config)
    if is_http_url(url):
        raise errors.ConfigError(needs_the_store(args, f"{mask_password(url)} is a taskq serve"))
    # Checked as a store's alone: a bad one's refusal lists no taskq serve's URL to write.
    parse_store_url(url)
    return url


def needs_the_store(args: argparse.Namespace, why: str) -> str:
    """The refusal of a command that needs the store itself, and ``why`` it was not given
    it: a taskq serve's URL, or a request the server has no endpoint for."""
    return (
        f"{args.command_name} needs the store itself ({why}); use --store with the store's "
        "URL (sqlite:///path/file.db or rqlite://host:port)"
    )


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
    """A client over the command's store, or its taskq serve; closed on the way out.

    ``read_only`` for a command that only reads (see the module's docstring);
    ``migrate=False`` leaves the schema alone. Neither means anything over HTTP.
    """
    return client_at(named_url(args), config=args.config, migrate=migrate, read_only=read_only)


@contextmanager
def client_at(
    url: str, *, config: str | None = None, migrate: bool = True, read_only: bool = False
) -> Iterator[Client]:
    """A client over the store at ``url``, opened as :func:`opened_url` does; or over HTTP,
    when ``url`` is a taskq serve's (``config``: the command's config file)."""
    if is_http_url(url):
        with _served(url, config) as served:
            yield served
        return
    with opened_url(url, migrate=migrate, read_only=read_only) as store:
        # The config file's [queues.NAME] defaults go with the store's client, as they
        # do for a script's on this machine: named, a store handed over open reads them.
        yield Client(store=store, config_path=config_file_read(config), import_names=False)


@contextmanager
def _served(url: str, config: str | None) -> Iterator[Client]:
    """A client of the taskq serve at ``url``, bearing ``TASKQ_TOKEN``, as a script's is,
    once the server is reached (:data:`FIRST_CONTACT_SECONDS`); a refused token is told in
    the command's terms, not in Python's."""
    where = f"taskq serve at {mask_password(url)}"
    try:
        with Client(url, config_path=config, import_names=False) as served:
            if served.http is not None:
                served.http.reach(FIRST_CONTACT_SECONDS)
            yield served
    except errors.Unauthorized as exc:
        # Blank counts as unset: the client strips a token's surrounding whitespace.
        if not os.environ.get(TOKEN_ENV, "").strip():
            said = f"{where} wants a token: set {TOKEN_ENV} to one ('taskq token new' makes one)"
        else:
            said = f"{where} refused the token in {TOKEN_ENV}: {exc}"
        raise errors.Unauthorized(said) from exc


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
