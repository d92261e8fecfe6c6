"""The store's execution totals: the SQL's buckets are the ones the Python names."""

from __future__ import annotations

import re

from taskq.broker.ops import queries
from taskq.broker.ops.jobs import ATTEMPT_SECONDS_BUCKETS


def test_the_histogram_query_buckets_by_the_declared_bounds() -> None:
    sql = queries.query("execution_seconds_histogram")
    pairs = re.findall(r"seconds <= ([\d.]+) THEN ([\d.]+)", sql)
    bounds = [float(limit) for limit, _ in pairs]
    assert bounds == [float(then) for _, then in pairs]
    assert tuple(bounds) == ATTEMPT_SECONDS_BUCKETS
