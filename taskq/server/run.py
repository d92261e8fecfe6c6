"""Running the app under uvicorn: the listen address, TLS, and the open-server safeguard."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import sys
from pathlib import Path

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from taskq import errors
from taskq.broker.client.client import AsyncClient
from taskq.broker.client.connect import open_store
from taskq.config import ServerSection
from taskq.server.app import create_app
from taskq.server.auth import Tokens, TokenSource, WatchedTokens

log = logging.getLogger("taskq.server")
SHUTDOWN_GRACE_SECONDS = 5


class StoppingServer(uvicorn.Server):
    """uvicorn's server, which sets ``stopping`` as it starts to stop (SIGTERM, Ctrl-C).

    The app's long polls answer at once then, and its followed streams end
    (:mod:`taskq.server.endpoint`), so that the stop's grace ends none of them
    halfway: uvicorn would cancel each, a long poll's as a bare 500.
    """

    def __init__(self, config: uvicorn.Config, stopping: asyncio.Event) -> None:
        super().__init__(config)
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Set on the event loop, not in handle_exit (uvicorn's signal handler, run between
        # any two bytecodes of the loop's own). uvicorn's shutdown closes the listening
        # sockets before it first yields: a client that asks again at once, once answered,
        # is refused and waits for the server that comes back, not for this one.
        self.stopping.set()
        await super().shutdown(sockets)


def run_uvicorn(config: uvicorn.Config, stopping: asyncio.Event) -> None:
    """Serve ``config``'s app until interrupted, setting ``stopping`` as it starts to stop;
    as ``uvicorn.run`` does, a Ctrl-C ends it quietly, and a failed start exits with 3."""
    server = StoppingServer(config, stopping)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6) as a host and a port, or ConfigError."""
    host, _, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit():
        raise errors.ConfigError(f"listen address {listen!r} must be HOST:PORT")
    if not 1 <= int(port) <= 65535:
        raise errors.ConfigError(f"listen address {listen!r}: the port must be 1 to 65535")
    return host, int(port)


class _Encrypted(Exception):
    """The key asked for a passphrase: serve has none to give, and must not prompt for one."""


def _refuse_passphrase() -> str:
    raise _Encrypted


def check_tls_files(cert: str, key: str) -> None:
    """ConfigError naming the file at fault unless ``cert`` and ``key`` load as uvicorn needs."""
    for kind, path in (("certificate", cert), ("key", key)):
        # OpenSSL's own refusal of a file it cannot open does not name it.
        try:
            Path(path).open("rb").close()
        except OSError as exc:
            raise errors.ConfigError(f"TLS {kind} {path}: cannot read it: {exc.strerror}") from exc
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, _refuse_passphrase)
    except _Encrypted as exc:
        raise errors.ConfigError(
            f"TLS key {key} is encrypted: taskq serve needs a key without a passphrase"
        ) from exc
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            message = f"TLS key {key} is not the key of the certificate {cert}"
        elif not _holds_a_certificate(cert):
            message = f"TLS certificate {cert} holds no PEM certificate"
        else:
            message = f"TLS key {key} holds no PEM private key"
        raise errors.ConfigError(message) from exc


def _holds_a_certificate(path: str) -> bool:
    # OpenSSL's "PEM lib" does not say which file it was reading: a file of
    # trusted certificates is parsed for certificates alone.
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except ssl.SSLError:
        return False
    return True


def check_address_free(host: str, port: int) -> None:
    """ConfigError naming ``host:port`` unless every address it names can be bound now.

    Binds as the server's event loop will, then lets go, so that uvicorn's own
    failure (six log lines, exit code 3) is met only if another process takes
    the port in between.
    """
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise errors.ConfigError(f"cannot listen on {shown}: {exc.strerror}") from exc
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise errors.ConfigError(f"cannot listen on {shown}: {exc.strerror}") from exc


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
    if settings.tls_cert is not None and settings.tls_key is not None:
        check_tls_files(settings.tls_cert, settings.tls_key)
    check_address_free(host, port)
    # Opened (and migrated) before listening: a bad URL or a store that is not
    # there fails the command at once rather than every request.
    store = open_store(store_url)
    stopping = asyncio.Event()
    # Its waits are its callers' long polls: the notes of why a job waits are theirs to say.
    app = create_app(
        lambda: AsyncClient(store=store, import_names=False, wait_notes=False), tokens, stopping
    )
    scheme = "http" if settings.tls_cert is None else "https"
    # The store first: a server on another store than the workers' knows none of their jobs.
    print(
        f"taskq serve: store {store.url}, listening on {scheme}://{settings.listen}",
        file=sys.stderr,
        flush=True,
    )
    if tokens.open:
        log.warning("no tokens configured: every request may do everything, as 'anonymous'")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        log_level="info",
        access_log=settings.access_log,
        # A proxy's idle timeout is usually longer than a long-polled result.
        timeout_keep_alive=75,
        # A followed output stream and a long poll end as the server starts to stop
        # (StoppingServer): this bounds the stop should another request hold it.
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        server_header=False,
    )
    run_uvicorn(config, stopping)
