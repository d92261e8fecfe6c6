"""Running the app under uvicorn: the listen address, TLS, and the open-server safeguard."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

import uvicorn

from taskq import errors
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.connect import open_store
from taskq.config import ServerSection
from taskq.server.app import create_app
from taskq.server.auth import Tokens, TokenSource, WatchedTokens

log = logging.getLogger("taskq.server")


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6) as a host and a port, or ConfigError."""
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise errors.ConfigError(f"listen address {listen!r} must be HOST:PORT")
    return host, int(port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(store_url: str, settings: ServerSection, tokens_file: Path | None = None) -> None:
    """Serve the API on ``settings.listen`` until interrupted (SIGINT or SIGTERM).

    ``tokens_file``: the config file ``settings`` came from, whose tokens are
    followed as they change (:class:`WatchedTokens`); else ``settings.tokens``.
    """
    host, port = parse_listen(settings.listen)
    tokens: TokenSource = (
        Tokens(settings.tokens) if tokens_file is None else WatchedTokens(tokens_file)
    )
    if tokens.open and not _loopback(host):
        raise errors.ConfigError(
            f"no [[server.tokens]] configured: an open server may listen on a loopback "
            f"address only, not {host!r}"
        )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise errors.ConfigError("TLS needs both a certificate (tls_cert) and its key (tls_key)")
    # Opened (and migrated) before listening: a bad URL or a store that is not
    # there fails the command at once rather than every request.
    store = open_store(store_url)
    app = create_app(lambda: AsyncClient(store=store, import_names=False), tokens)
    if tokens.open:
        log.warning("no tokens configured: every request may do everything, as 'anonymous'")
    uvicorn.run(
        app,
        host=host,
        port=port,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        log_level="info",
        access_log=settings.access_log,
        # A proxy's idle timeout is usually longer than a long-polled result.
        timeout_keep_alive=75,
        server_header=False,
    )
