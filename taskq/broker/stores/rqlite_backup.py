"""A cluster's whole database as a SQLite file, and a SQLite file loaded into a cluster.

rqlite (v10.2) answers ``GET /db/backup`` with a binary SQLite file by
default: the leader checkpoints its WAL, holds off further checkpoints and
streams its database file, so the copy is the database as of one commit
while writes carry on into the WAL. ``POST /db/load`` with such a file
replaces the whole database through the Raft log, so every node of a
cluster of any size takes it. (``/boot`` does the same for a single node
only, bypassing Raft; taskq does not need it.)

Both move a whole file, which taskq's own HTTP client does not do (it keeps
replies in memory and speaks JSON), so they go over :mod:`http.client`
with the store's credentials and TLS trust, to the node that leads.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from taskq import errors
from taskq.broker.stores.http_transport import TransportOptions
from taskq.broker.stores.rqlite_store import RqliteStore

_CHUNK_BYTES = 1 << 20
# The leader checkpoints before the first byte, and loading a file takes a while:
# a transfer waits at least this long for each read or write, whatever the URL's timeout.
_TRANSFER_TIMEOUT_SECONDS = 120.0


def download_backup(
    store: RqliteStore, destination: Path, *, on_bytes: Callable[[int], None] | None = None
) -> int:
    """Write the leader's binary backup to the new file ``destination``; its size in bytes.

    ``on_bytes`` is told the bytes written so far after each MiB.
    """
    connection, leader = _connect(store)
    try:
        connection.request("GET", "/db/backup", headers=_headers(store))
        reply = connection.getresponse()
        if reply.status != 200:
            raise _refusal(store, leader, "backup", reply)
        written = 0
        with destination.open("xb") as out:
            while chunk := reply.read(_CHUNK_BYTES):
                out.write(chunk)
                written += len(chunk)
                if on_bytes is not None:
                    on_bytes(written)
        return written
    except OSError as exc:
        raise errors.StoreUnavailable(f"rqlite {leader}: the backup broke off: {exc}") from exc
    finally:
        connection.close()


def load_backup(store: RqliteStore, source: Path) -> None:
    """Replace the cluster's whole database with the SQLite file ``source`` (``/db/load``)."""
    connection, leader = _connect(store)
    headers = {
        **_headers(store),
        "Content-Type": "application/octet-stream",
        "Content-Length": str(source.stat().st_size),
    }
    try:
        with source.open("rb") as body:
            connection.request("POST", "/db/load", body=body, headers=headers)
        reply = connection.getresponse()
        if reply.status != 200:
            raise _refusal(store, leader, "load", reply)
        answer = _json(reply.read())
        error = answer.get("error") if isinstance(answer, dict) else None
        if error:
            raise errors.StoreError(f"rqlite {leader} did not load the file: {error}")
    except OSError as exc:
        raise errors.OutcomeUnknown(
            f"rqlite {leader}: the load broke off and may or may not have been applied: {exc}"
        ) from exc
    finally:
        connection.close()


def _connect(store: RqliteStore) -> tuple[http.client.HTTPConnection, str]:
    """A connection to the node that leads now, and its base URL."""
    leaders = [node.address for node in store.nodes() if node.leader and node.address]
    if not leaders:
        raise errors.StoreUnavailable(f"rqlite cluster {store.url} has no leader now")
    leader = leaders[0]
    parts = urlsplit(leader)
    host, port = parts.hostname or "", parts.port
    target = store.target
    # Bounds each read and write, not the whole transfer.
    timeout = max(target.timeout, _TRANSFER_TIMEOUT_SECONDS)
    if parts.scheme == "https":
        options = TransportOptions(
            timeout=timeout,
            connect_timeout=target.timeout,
            ca_file=target.ca_file,
            insecure=target.insecure,
        )
        return http.client.HTTPSConnection(
            host, port, timeout=timeout, context=options.ssl_context()
        ), leader
    return http.client.HTTPConnection(host, port, timeout=timeout), leader


def _headers(store: RqliteStore) -> dict[str, str]:
    target = store.target
    options = TransportOptions(
        timeout=target.timeout,
        connect_timeout=target.timeout,
        username=target.username,
        password=target.password,
    )
    authorization = options.authorization()
    return {} if authorization is None else {"Authorization": authorization}


def _refusal(
    store: RqliteStore, leader: str, what: str, reply: http.client.HTTPResponse
) -> errors.StoreError:
    text = reply.read(4096).decode("utf-8", errors="replace").strip()
    detail = f"rqlite {leader} refused the {what} (HTTP {reply.status}): {text or reply.reason}"
    if reply.status == 401:
        return errors.StorePermissionDenied(
            f"{detail}; the user of {store.url} needs rqlite's '{what}' permission"
        )
    if reply.status == 503:
        return errors.StoreUnavailable(detail)
    return errors.StoreError(detail)


def _json(data: bytes) -> object:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None
