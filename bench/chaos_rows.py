"""The store's rows as the chaos run's verdicts read them: plain dicts, as stored.

Shared by :mod:`bench.chaos_verdict` and :mod:`bench.chaos_workflow_verdict`,
which read the rows themselves rather than the broker's records of them, so
that a mistake in the broker's parsing cannot hide one in its SQL.
"""

from __future__ import annotations

import json
from typing import Any

Row = dict[str, Any]


def stored_json(value: Any) -> Any:
    """A JSON column's value decoded; anything that is not JSON text as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
