"""An idle worker's offer (``taskq.broker.ops.offers``), as the worker keeps track of it."""

from __future__ import annotations

import math


class StandingOffer:
    """The token of the worker's offer out (None: none), and since when it is known unfilled.

    An offer is left by an idle worker's claim that took nothing, withdrawn by
    its next claim, and ends when a write fills it: the worker's looks read
    what it holds meanwhile (``ClaimRequests``), and its heartbeats keep it
    fresh for ``fresh_seconds`` more (``Heartbeat``).
    """

    def __init__(self, *, fresh_seconds: float) -> None:
        self.fresh_seconds = fresh_seconds
        self.token: str | None = None
        self.unfilled_at = -math.inf
        """When (monotonic) the worker last knew the offer unfilled: the lease of a job
        handed to it runs from no sooner."""

    def made(self, token: str, sent_at: float) -> None:
        """The offer ``token`` is out, left by a write sent at ``sent_at``."""
        self.token = token
        self.unfilled_at = sent_at

    def looked(self, at: float) -> None:
        """A read begun at ``at`` found nothing handed to the offer."""
        self.unfilled_at = at

    def gone(self) -> None:
        """Withdrawn, or filled and its job read."""
        self.token = None
