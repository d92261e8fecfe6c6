"""Bearer tokens from the ``[server]`` config: who a request comes from and what it may do.

Only digests are kept in memory and compared (in constant time), so neither
a log line nor a traceback can show a token. A token's name is the
submitter of every job submitted with it, so per-submitter rate limits hold
whatever a request claims. With no token configured the server is open:
every request may do everything as ``anonymous`` (``taskq serve`` allows
that only on a loopback address).

:class:`WatchedTokens` follows the config file a server started with: a
token added by ``taskq token new`` or removed by ``taskq token revoke`` is
taken or refused within :data:`RECHECK_SECONDS`, without a restart. Whether
the server is open is decided when it starts: one started with tokens
refuses every request once the last is revoked, rather than opening.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

import msgspec

from taskq import errors
from taskq.broker.client import problem_types
from taskq.config import Scope, TokenSection, load_config

log = logging.getLogger("taskq.server")

ANONYMOUS = "anonymous"
RECHECK_SECONDS = 1.0
"""How often, at most, a request makes the server look whether its token file changed
(one ``stat``; the file is read again only when it did)."""
ALL_SCOPES: frozenset[Scope] = frozenset({"read", "submit", "admin"})


class Caller(msgspec.Struct, frozen=True):
    """Who made a request: the token's name and its scopes."""

    name: str
    scopes: frozenset[Scope]

    def require(self, scope: Scope) -> None:
        """Raise :class:`taskq.errors.Forbidden` unless this caller holds ``scope``
        (``admin`` holds all)."""
        if scope not in self.scopes and "admin" not in self.scopes:
            raise errors.Forbidden(f"token {self.name!r} lacks the {scope!r} scope")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Tokens:
    """The configured tokens, by digest."""

    def __init__(self, sections: Sequence[TokenSection]) -> None:
        self._callers: list[tuple[bytes, Caller]] = []
        names: set[str] = set()
        for section in sections:
            if (section.sha256 is None) == (section.token is None):
                raise errors.ConfigError(
                    f"[server.tokens] {section.name!r} needs exactly one of sha256 and token"
                )
            if section.name in names:
                raise errors.ConfigError(f"[server.tokens] {section.name!r} is named twice")
            names.add(section.name)
            digest = (
                bytes.fromhex(section.sha256)
                if section.sha256 is not None
                else _digest(str(section.token))
            )
            self._callers.append((digest, Caller(section.name, frozenset(section.scopes))))

    @property
    def open(self) -> bool:
        """Whether no token is configured, so every request is let in."""
        return not self._callers

    def caller(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header names, or :class:`taskq.errors.Unauthorized`."""
        if self.open:
            return Caller(ANONYMOUS, ALL_SCOPES)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.Unauthorized.tokenless(problem_types.BEARER_HEADER)
        presented = _digest(token.strip())
        found = None
        # Every digest is compared, so the time taken tells nothing about which matched.
        for digest, caller in self._callers:
            if hmac.compare_digest(digest, presented):
                found = caller
        if found is None:
            raise errors.Unauthorized("the bearer token is not one this server knows")
        return found


class WatchedTokens:
    """The tokens of the config file at ``path``, read again when the file changes.

    A request looks (one ``stat``: inode, size, modification time) at most
    every ``recheck_seconds``; a file that no longer reads (half-edited by
    hand) leaves the tokens as they were, logged. ``open`` is the start's.
    """

    def __init__(
        self,
        path: Path,
        *,
        recheck_seconds: float = RECHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._recheck_seconds = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp = self._stamp_now()
        self._tokens = Tokens(load_config(path).server.tokens)
        self.open = self._tokens.open
        self._checked_at = clock()

    def _stamp_now(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_ino, stat.st_size, stat.st_mtime_ns

    def _refresh(self) -> Tokens:
        with self._lock:
            now = self._clock()
            if now - self._checked_at < self._recheck_seconds:
                return self._tokens
            self._checked_at = now
            stamp = self._stamp_now()
            if stamp == self._stamp:
                return self._tokens
            try:
                tokens = Tokens(load_config(self.path).server.tokens)
            except errors.ConfigError as exc:
                log.warning("tokens kept as they were: %s", exc)
                return self._tokens
            self._stamp, self._tokens = stamp, tokens
            log.info("tokens read again from %s", self.path)
            return tokens

    def caller(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header names, among the file's tokens now."""
        tokens = self._refresh()
        if self.open:
            return Caller(ANONYMOUS, ALL_SCOPES)
        if tokens.open:
            raise errors.Unauthorized("this server has no token left: every one was revoked")
        return tokens.caller(authorization)


TokenSource: TypeAlias = Tokens | WatchedTokens
"""Who may ask: tokens fixed at start, or those of a config file as it changes."""
