"""Store URLs: which store to open, parsed once into a typed target.

``sqlite:///path/file.db`` names an embedded store (a relative path after
``sqlite://`` is taken from the working directory), and
``rqlite://[user:pass@]host:port[,host:port...]`` (``rqlites://`` for TLS)
names a cluster by any of its nodes. Options ride in the query string, e.g.
``?timeout=5&ca_file=/etc/ca.pem`` or ``?synchronous=normal``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote

import msgspec

from taskq import errors

STORE_ENV = "TASKQ_STORE"
_SQLITE_OPTIONS = {"busy_timeout_ms", "synchronous"}
_RQLITE_OPTIONS = {"timeout", "ca_file", "insecure", "retries"}
_SYNCHRONOUS_LEVELS = {"OFF", "NORMAL", "FULL", "EXTRA"}


class SqliteTarget(msgspec.Struct, frozen=True):
    """An embedded store: a file path and its tuning."""

    path: Path
    busy_timeout_ms: int = 10_000
    synchronous: str = "FULL"


class RqliteTarget(msgspec.Struct, frozen=True):
    """A cluster: its known nodes, credentials, TLS settings and request bounds."""

    nodes: tuple[str, ...]
    tls: bool = False
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    timeout: float = 10.0
    retries: int = 8

    def base_urls(self) -> tuple[str, ...]:
        scheme = "https" if self.tls else "http"
        return tuple(f"{scheme}://{node}" for node in self.nodes)


StoreTarget = SqliteTarget | RqliteTarget


def default_store_url() -> str:
    """The embedded store in the user's data directory: nothing to start."""
    # Imported here: a process given its store's URL never needs it.
    import platformdirs

    return f"sqlite://{Path(platformdirs.user_data_dir('taskq')) / 'taskq.db'}"


def resolve_store_url(explicit: str | None = None, configured: str | None = None) -> str:
    """Pick the store URL: an explicit one, then ``TASKQ_STORE``, then config, then default."""
    for candidate in (explicit, os.environ.get(STORE_ENV), configured):
        if candidate:
            return candidate
    return default_store_url()


def mask_password(url: str) -> str:
    """The URL with its password replaced, fit for logs and error messages."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hosts}"


def is_http_url(url: str) -> bool:
    """Whether ``url`` names a ``taskq serve`` (http:// or https://) rather than a store."""
    return url.startswith(("http://", "https://"))


def parse_store_url(url: str, *, served_too: bool = False) -> StoreTarget:
    """Parse a store URL; a malformed one raises :class:`taskq.errors.ConfigError`.

    ``served_too``: the caller takes a taskq serve's URL as well (and has
    looked for one before), so the refusal lists it among the URLs to write.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        given, colon, _ = url.partition(":")
        said = f"needs :// after {given}:" if colon and given.isalpha() else "has no scheme"
        embedded = "sqlite:///path/file.db (or sqlite://file.db, relative to the current folder)"
        cluster = "rqlite://host:port[,host:port...]"
        use = (
            f"{embedded}, {cluster} or a taskq serve's http(s)://host:port"
            if served_too
            else f"{embedded} or {cluster}"
        )
        raise errors.ConfigError(f"store URL {mask_password(url)!r} {said}; use {use}")
    location, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
    if scheme == "sqlite":
        return _parse_sqlite(url, location, options)
    if scheme in {"rqlite", "rqlites"}:
        return _parse_rqlite(url, location, options, tls=scheme == "rqlites")
    hint = (
        " (the URL of a taskq serve is for clients: taskq, taskq-tui and "
        "taskq.Client(url, token=...); this needs the store itself)"
        if scheme in {"http", "https"}
        else ""
    )
    expected = "sqlite, rqlite or rqlites"
    if served_too:
        expected = "sqlite, rqlite, rqlites, or http(s) for a taskq serve"
    raise errors.ConfigError(
        f"store URL {mask_password(url)!r} has unknown scheme {scheme!r}; expected {expected}{hint}"
    )


def _parse_sqlite(url: str, location: str, options: dict[str, str]) -> SqliteTarget:
    _reject_unknown(url, options, _SQLITE_OPTIONS)
    if not location:
        raise errors.ConfigError(f"store URL {url!r} names no file; e.g. sqlite:///tmp/taskq.db")
    synchronous = options.get("synchronous", "FULL").upper()
    if synchronous not in _SYNCHRONOUS_LEVELS:
        raise errors.ConfigError(
            f"store URL {url!r}: synchronous must be one of "
            f"{', '.join(sorted(level.lower() for level in _SYNCHRONOUS_LEVELS))}"
        )
    return SqliteTarget(
        path=Path(unquote(location)).expanduser().absolute(),
        busy_timeout_ms=_int_option(url, options, "busy_timeout_ms", 10_000),
        synchronous=synchronous,
    )


def _parse_rqlite(url: str, location: str, options: dict[str, str], *, tls: bool) -> RqliteTarget:
    _reject_unknown(url, options, _RQLITE_OPTIONS)
    userinfo, at, hosts = location.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        if not user or not colon:
            raise errors.ConfigError(
                f"store URL {mask_password(url)!r}: credentials must be user:password@"
            )
        username, password = unquote(user), unquote(secret)
    nodes = tuple(node.strip() for node in hosts.split(",") if node.strip())
    if not nodes:
        raise errors.ConfigError(f"store URL {mask_password(url)!r} names no rqlite node")
    for node in nodes:
        host, colon, port = node.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise errors.ConfigError(
                f"store URL {mask_password(url)!r}: node {node!r} is not host:port"
            )
    timeout = _float_option(url, options, "timeout", 10.0)
    if timeout <= 0:
        raise errors.ConfigError(f"store URL {mask_password(url)!r}: timeout must be positive")
    return RqliteTarget(
        nodes=nodes,
        tls=tls,
        username=username,
        password=password,
        ca_file=options.get("ca_file") or None,
        insecure=options.get("insecure", "").lower() in {"1", "true", "yes"},
        timeout=timeout,
        retries=_int_option(url, options, "retries", 8),
    )


def _reject_unknown(url: str, options: dict[str, str], known: set[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise errors.ConfigError(
            f"store URL {mask_password(url)!r}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )


def _int_option(url: str, options: dict[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise errors.ConfigError(
            f"store URL {mask_password(url)!r}: {name} must be an integer, got {raw!r}"
        ) from None


def _float_option(url: str, options: dict[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise errors.ConfigError(
            f"store URL {mask_password(url)!r}: {name} must be a number, got {raw!r}"
        ) from None
