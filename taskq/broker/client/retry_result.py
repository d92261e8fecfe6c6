"""What ``client.retry`` answers, on the store or over HTTP: the ids retried, and those
brought back with them."""

from __future__ import annotations

import builtins
from collections.abc import Iterable


class RetryResult(builtins.list[int]):
    """The ids of the jobs a retry queued again (or set waiting for their parents),
    ascending, as the list ``client.retry`` has always returned; and ``revived``,
    ascending: the jobs their ends had cancelled, brought back with them (waiting
    again). A list, so that callers that took the answer as one keep working.
    """

    def __init__(self, retried: Iterable[int] = (), revived: Iterable[int] = ()) -> None:
        super().__init__(retried)
        self.revived: tuple[int, ...] = tuple(revived)
