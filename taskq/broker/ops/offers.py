"""Offers: an idle worker's standing claim of one job, filled by the write that readies it.

On idle workers a job's start otherwise waits for two writes, one after the
other: the write that readies it (a submit, or the report that releases a
fan-in), then the claim of a worker woken by it. An idle worker that found
nothing to claim leaves an offer instead, in that claim's own write
(``ClaimRequest.offer``): its queues, labels and lease length, under a token
new for the offer. A write that readies jobs ends with
:func:`fill_statements`: the oldest fresh offer one of them fits takes it, by
the claim's rules for one job, under a lease token made of the offer's token,
with its execution row and its rate spend, as a claim would. The worker,
woken by the commit (or a hint), reads what its offer holds
(:func:`job_handed`): a read, where a claim is a write.

Every way an offer ends is a write of its worker's, or a fill: its next claim
withdraws it and reads what it held (``ClaimRequest.withdraw``), as does
its drain (:func:`offer_withdraw`). Its heartbeats keep it fresh
(``fresh_until``): a worker killed or frozen stops being handed jobs within
that time. A job handed to it is its worker's once taken: the worker's next
heartbeat, its next claim or its report says so, by the job's
``handed_until``; a job not taken by then goes back to its queue, the attempt
not counted (maintenance), so a worker frozen while idle costs the job that
wait and nothing more.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from taskq.broker.ops import claims, queries
from taskq.broker.ops.common import clock_tick
from taskq.broker.ops.plan import Op, Read, Write
from taskq.broker.records import ClaimedJob
from taskq.broker.stores.store import Consistency, Statement

FILL_CANDIDATES = 16
"""At most how many of a write's jobs a fill considers: a bulk submit's first ones."""


@functools.cache
def _fill_sql(candidates: str) -> str:
    return queries.query("offer_fill").format(candidates=candidates)


def fill_statements(*, keys: Sequence[str] = (), parents: Sequence[int] = ()) -> list[Statement]:
    """What ends a write that readies jobs: one of them to the oldest fresh offer it fits.

    The jobs are those of the idempotency ``keys`` the write inserted, or the
    children of ``parents`` (the jobs whose ends it reports), whichever is
    given; only those the write left queued and due can be taken.
    """
    if keys:
        candidates = (
            "SELECT id FROM jobs WHERE idempotency_key IN (SELECT value FROM json_each(:fill_keys))"
        )
        params = {"fill_keys": json.dumps(list(keys[:FILL_CANDIDATES]))}
    elif parents:
        candidates = (
            "SELECT child_id FROM job_parents"
            " WHERE parent_id IN (SELECT value FROM json_each(:fill_parents))"
        )
        params = {"fill_parents": json.dumps(list(parents))}
    else:
        return []
    return [
        Statement(_fill_sql(candidates), params),
        Statement(queries.query("offer_fill_executions")),
        Statement(queries.query("offer_fill_rate_spend")),
        Statement(queries.query("offer_drop_filled")),
    ]


def refresh_statement(worker_id: str, fresh_seconds: float) -> Statement:
    """With a heartbeat: the worker's offer, if it has one, fresh for ``fresh_seconds`` more."""
    return Statement(
        queries.query("offer_refresh"),
        {"worker_id": worker_id, "fresh_seconds": float(fresh_seconds)},
    )


def withdraw_statements(request: claims.ClaimRequest, offer_token: str) -> list[Statement]:
    """The worker's offer withdrawn, then the jobs it was handed, taken (a claim's rows)."""
    return [
        claims.offer_withdraw_statement(request.worker_id),
        claims.take_handed_statement(request, offer_token),
    ]


def job_handed(request: claims.ClaimRequest, offer_token: str) -> Op[list[ClaimedJob]]:
    """The jobs filled into the worker's offer of ``offer_token``: a read.

    From the leader on a cluster (``WEAK``): the write that filled the offer
    was committed there before its hint was sent. A read that misses it is
    made again at the worker's next look.
    """
    rows = yield Read(claims.claimed_by_token_statement(request, offer_token), Consistency.WEAK)
    return claims.claimed_rows(rows)


def offer_withdraw(request: claims.ClaimRequest, offer_token: str) -> Op[list[ClaimedJob]]:
    """Withdraw the worker's offer (its drain); the jobs it was handed before, to hand back."""
    batch = [clock_tick(None), *withdraw_statements(request, offer_token)]
    results = yield Write(batch, idempotent=True)
    return claims.claimed_rows(results[2].rows)
