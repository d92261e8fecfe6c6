"""A declared job with every option a submit by name takes from its declaration."""

from __future__ import annotations

import taskq


@taskq.job(
    queue="texts",
    max_attempts=5,
    timeout=600,
    retry=taskq.RetryPolicy(base=2.0, factor=3.0, cap=60.0, jitter=0.0),
)
def count_words(text: str, *, lower: bool = True) -> int:
    """Count the words of a text.

    The rest of the docstring is not published.
    """
    return len((text.lower() if lower else text).split())
