"""Finished attempts per minute over the last minutes, as a sparkline with its numbers."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from taskq.app import states
from taskq.broker.client.client import ThroughputBucket

# Attempts that ended without failing: handed back by a draining worker, or cancelled.
_NOT_FAILURES = frozenset({"released", "cancelled"})


class Throughput(Horizontal):
    """A sparkline of finished attempts per minute (oldest left) and the latest numbers."""

    def compose(self) -> ComposeResult:
        yield Sparkline([], id="throughput-sparkline")
        yield Static(id="throughput-summary")

    def show(self, buckets: Sequence[ThroughputBucket]) -> None:
        """Draw ``buckets``, oldest first, as the broker returns them."""
        totals = [sum(bucket.outcomes.values()) for bucket in buckets]
        self.query_one(Sparkline).data = [float(total) for total in totals]
        succeeded = failed = 0
        for bucket in buckets:
            for outcome, count in bucket.outcomes.items():
                if outcome == "succeeded":
                    succeeded += count
                elif outcome not in _NOT_FAILURES:
                    failed += count
        last = totals[-1] if totals else 0
        summary = Text()
        summary.append(f"{sum(totals):,}", style="bold").append(f" in {len(buckets)} min: ")
        summary.append(f"{succeeded:,} succeeded", style=states.theme_style(self.app, "success"))
        summary.append(" · ")
        summary.append(f"{failed:,} failed", style=states.theme_style(self.app, "error"))
        summary.append(f"\n{last:,} this minute · peak {max(totals, default=0):,}/min")
        self.query_one("#throughput-summary", Static).update(summary)
