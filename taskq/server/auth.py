"""Bearer tokens from the ``[server]`` config: who a request comes from and what it may do.

Only digests are kept in memory and compared (in constant time), so neither
a log line nor a traceback can show a token. A token's name is the
submitter of every job submitted with it, so per-submitter rate limits hold
whatever a request claims. With no token configured the server is open:
every request may do everything as ``anonymous`` (``taskq serve`` allows
that only on a loopback address).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import msgspec

from taskq import errors
from taskq.broker.client.problem_types import Forbidden, Unauthorized
from taskq.config import Scope, TokenSection

ANONYMOUS = "anonymous"
ALL_SCOPES: frozenset[Scope] = frozenset({"read", "submit", "admin"})


class Caller(msgspec.Struct, frozen=True):
    """Who made a request: the token's name and its scopes."""

    name: str
    scopes: frozenset[Scope]

    def require(self, scope: Scope) -> None:
        """Raise :class:`Forbidden` unless this caller holds ``scope`` (``admin`` holds all)."""
        if scope not in self.scopes and "admin" not in self.scopes:
            raise Forbidden(f"token {self.name!r} lacks the {scope!r} scope")


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
        """The caller an ``Authorization`` header names, or :class:`Unauthorized`."""
        if self.open:
            return Caller(ANONYMOUS, ALL_SCOPES)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send a token as 'Authorization: Bearer TOKEN'")
        presented = _digest(token.strip())
        found = None
        # Every digest is compared, so the time taken tells nothing about which matched.
        for digest, caller in self._callers:
            if hmac.compare_digest(digest, presented):
                found = caller
        if found is None:
            raise Unauthorized("the bearer token is not one this server knows")
        return found
