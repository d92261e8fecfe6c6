"""A client that submitted a job tells idle workers on a cluster to look now.

The workers listen for the datagram (:mod:`taskq.broker.stores.wake_hints`)
and record where in their ``workers`` rows. A client keeps the active
workers' addresses for :data:`_ADDRESSES_FRESH_SECONDS` and, once a submit
has committed, sends each worker of the job's queue one datagram. While it
knows of no worker for a job's queue it reads them again sooner
(:data:`_UNSERVED_FRESH_SECONDS`): workers and clients usually start
together, and a client that read the addresses a moment before the workers
registered would otherwise leave them to poll for seconds.

A worker sends the same hints for the jobs its reports release or spawn
(``taskq.worker.claim_requests``), skipping its own socket.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Collection

from taskq import errors
from taskq.broker.ops.plan import Op
from taskq.broker.ops.wakeups import WakeTarget, socket_address, worker_wake_targets
from taskq.broker.stores.wake_hints import HINT

_ADDRESSES_FRESH_SECONDS = 5.0
_UNSERVED_FRESH_SECONDS = 0.2


class WakeSender:
    """A client's side: the workers' addresses, kept a few seconds, and one datagram each."""

    def __init__(self, *, skip: str | None = None) -> None:
        """``skip``: the sender's own hint socket (a worker's), which gets none."""
        self._workers: list[WakeTarget] = []
        self._fetched_at = -_ADDRESSES_FRESH_SECONDS
        self._skip = None if skip is None else socket_address(skip)

    def after_submit(self, queues: Collection[str]) -> Op[None]:
        """Hint the workers of ``queues``; read their addresses first when those are stale."""
        age = time.monotonic() - self._fetched_at
        targets = self._serving(queues)
        if age >= _ADDRESSES_FRESH_SECONDS or (not targets and age >= _UNSERVED_FRESH_SECONDS):
            self._fetched_at = time.monotonic()
            try:
                self._workers = yield from worker_wake_targets()
            except errors.StoreError:
                self._workers = []  # the submit stands; the workers find the job by polling
            targets = self._serving(queues)
        for target in targets:
            # Its own socket counts as serving (no early re-read), but gets nothing.
            if target != self._skip:
                self._send(target)

    def _serving(self, queues: Collection[str]) -> list[tuple[str, int]]:
        return [target for target, served in self._workers if served.intersection(queues)]

    def _send(self, target: tuple[str, int]) -> None:
        # A socket per hint: microseconds beside a submit's round trip, and
        # nothing for the client to close.
        family = socket.AF_INET6 if ":" in target[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            with contextlib.suppress(OSError):  # a full buffer, a gone worker: polling covers it
                sender.sendto(HINT, target)
