"""The bounds of a value a request sets, declared once for the check and for the schema.

The broker's checks (:mod:`taskq.broker.job_validation`, the queue settings,
a job's limits, :class:`taskq.retry.RetryPolicy`) hold a value to a
:class:`Bounds` or a :class:`Text`, and the HTTP API's OpenAPI document
states the same one (:meth:`Bounds.schema`, put on the member of the body it
applies to, or :meth:`Bounds.keywords` inside a schema built whole), so the
two cannot drift apart. The schema only describes: the broker's check is the
one that refuses, with its own message, whichever way the value came in.

A leaf module (it imports only msgspec), so that :mod:`taskq.retry`, below
the broker, declares its bounds with it too.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import msgspec


class Bounds(NamedTuple):
    """A number from ``low`` (itself excluded if ``low_excluded``) to ``high`` (None: no end)."""

    low: float
    high: float | None = None
    low_excluded: bool = False

    def admits(self, number: float) -> bool:
        """Whether ``number`` lies within."""
        above = number > self.low if self.low_excluded else number >= self.low
        return above and (self.high is None or number <= self.high)

    def keywords(self) -> dict[str, Any]:
        """These bounds as JSON Schema keywords."""
        keywords: dict[str, Any] = {
            ("exclusiveMinimum" if self.low_excluded else "minimum"): _plain(self.low)
        }
        if self.high is not None:
            keywords["maximum"] = _plain(self.high)
        return keywords

    def schema(self) -> msgspec.Meta:
        """These bounds for ``Annotated[float, bounds.schema()]``."""
        return msgspec.Meta(extra_json_schema=self.keywords())


class Text(NamedTuple):
    """A string of ``shortest`` to ``longest`` characters matching ``pattern`` (whole).

    ``pattern`` is written in the part of regular expressions that Python and
    JSON Schema (ECMA-262) read alike: anchored by ``^`` and ``$``, no ``\\w``
    (which is Unicode in Python, ASCII in ECMA-262).
    """

    shortest: int = 0
    longest: int | None = None
    pattern: str | None = None

    def admits(self, text: str) -> bool:
        """Whether ``text`` is long enough, short enough, and matches the pattern whole."""
        if len(text) < self.shortest or (self.longest is not None and len(text) > self.longest):
            return False
        return self.pattern is None or _compiled(self.pattern).fullmatch(text) is not None

    def keywords(self) -> dict[str, Any]:
        """This text's bounds as JSON Schema keywords."""
        keywords: dict[str, Any] = {}
        if self.shortest:
            keywords["minLength"] = self.shortest
        if self.longest is not None:
            keywords["maxLength"] = self.longest
        if self.pattern is not None:
            keywords["pattern"] = self.pattern
        return keywords

    def schema(self) -> msgspec.Meta:
        """This text's bounds for ``Annotated[str, text.schema()]``."""
        return msgspec.Meta(extra_json_schema=self.keywords())


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    compiled = _PATTERNS.get(pattern)
    if compiled is None:
        compiled = _PATTERNS[pattern] = re.compile(pattern)
    return compiled


def _plain(number: float) -> float:
    """A whole number as an int, so that the schema of an integer member says 1, not 1.0."""
    return int(number) if float(number).is_integer() else number
