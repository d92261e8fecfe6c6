"""A single submit taken apart: its store write alone, beside the whole submit.

``enqueue.single`` times the whole ``Client.submit``: the call checked and
its job built (``checked_row``: every field's check, the payload's JSON, its
key), the client's group commit and plan runner, then the write
(``jobs_write``: the clock's tick, the rate spend and the job's INSERT in one
transaction, through the store). :func:`write_alone` times that write alone,
for a job built and checked once before the loop, each with a key of its
own, so that the two figures' ratio is the share of a submit's time that
is its write: what is left is the client's Python, most of it checking and
building the job. On a disk whose fsync puts the process to sleep that
Python runs cold, and costs several times what it costs back to back
(docs/performance.md). :func:`in_turn` takes the two in blocks, one after
the other, since the fsync under both moves by half from one second to
the next on a small machine's disk.
"""

from __future__ import annotations

import time

from taskq.broker.client.client import Client, call_spec
from taskq.broker.ops import plan
from taskq.broker.ops.enqueue import auto_key, checked_row, jobs_write


def write_alone(client: Client, target: str, queue: str, count: int) -> list[float]:
    """``count`` writes of a one-job submit, back to back, without the job's checks and
    building: each one's seconds. The job calls ``target`` in ``queue``."""
    row = checked_row(call_spec(target, [0], queue=queue, submitter=client.submitter))
    timings = []
    for _ in range(count):
        # A key of its own, as every submit has: the same one would insert nothing.
        job = {**row, "key": auto_key()}
        tick = time.perf_counter()
        plan.run(client.store, jobs_write([job], now=None))
        timings.append(time.perf_counter() - tick)
    return timings


def in_turn(
    client: Client, target: str, queue: str, count: int, blocks: int = 10
) -> tuple[list[float], list[float]]:
    """Single submits (unchecked, by name) and writes alone, ``count // blocks`` a block,
    ``blocks`` blocks each way taken in turn (the remainder of ``count`` is not run): the
    seconds of each block of submits, and of each block of writes, in order."""
    each = max(1, count // blocks)
    submits, writes = [], []
    for _ in range(blocks):
        tick = time.perf_counter()
        for number in range(each):
            client.submit(target, number, queue=queue, unchecked=True)
        submits.append(time.perf_counter() - tick)
        writes.append(sum(write_alone(client, target, queue, each)))
    return submits, writes
