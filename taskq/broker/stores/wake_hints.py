"""Wake-up hints: the datagram that tells idle workers on a cluster to look, and their socket.

rqlite pushes nothing to its clients, so an idle worker on a cluster looks
for work now and then (:func:`look_seconds`). To see a job at once, each
worker listens on a UDP socket (:class:`WakeListener`), on the address it
reaches the cluster from, and records that address in its ``workers`` row; a
client that submitted a job, or a worker whose report freed jobs, sends each
worker of the jobs' queue one datagram (:mod:`taskq.broker.client.wake_sender`).

A hint is only a hint. It carries nothing but :data:`HINT`; anything else
is dropped. It is not needed for correctness: a lost hint leaves the worker
to its usual look a poll interval later, and a forged one makes it look
sooner, no more often than every :data:`_LEAST_SECONDS_BETWEEN_WAKES`. The
claim that follows is the same claim as ever, with its lease and fencing.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

import anyio

HINT = b"taskq wake 1"
# How often an idle worker on a cluster looks: soon after a hint (the node it
# reads may not have the job the hint told of yet), or when it has no socket for
# hints; else seldom, as a hint wakes it for each job submitted or freed, and
# its looks only catch what no hint tells of (a lost datagram, a job whose time
# comes, a lease run out). A look every 20 ms cost an idle worker 7% of a core,
# and its node as much (2 cores, 2026-12-03).
_LOOK_SECONDS = 0.02
_IDLE_LOOK_SECONDS = 0.25
_AFTER_HINT_SECONDS = 1.0
_LEAST_SECONDS_BETWEEN_WAKES = 0.002
_LARGEST_DATAGRAM = 512


class WakeListener:
    """A worker's UDP socket for hints, bound to ``host`` on a port the system picks."""

    def __init__(self, host: str) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_DGRAM)
        try:
            self._socket.bind((host, 0))
            self._socket.setblocking(False)
        except OSError:
            self._socket.close()
            raise
        port = self._socket.getsockname()[1]
        self.address = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        self._woken_at = -math.inf
        self._busy = threading.Lock()

    def hinted_within(self, seconds: float) -> bool:
        """Whether a hint ended a wait in the last ``seconds``."""
        return time.monotonic() - self._woken_at < seconds

    async def wait(self, seconds: float) -> None:
        """Return on a hint, or after ``seconds``."""
        # The socket has one reader at a time; a second waiter at once just sleeps.
        if not self._busy.acquire(blocking=False):
            await anyio.sleep(seconds)
            return
        try:
            with anyio.move_on_after(seconds):
                while not self._hinted():
                    await anyio.wait_readable(self._socket)
                # A flood of hints, forged or not, wakes no more often than this.
                since = time.monotonic() - self._woken_at
                await anyio.sleep(max(0.0, _LEAST_SECONDS_BETWEEN_WAKES - since))
                self._woken_at = time.monotonic()
        finally:
            self._busy.release()

    def _hinted(self) -> bool:
        """Read every queued datagram; whether one was a hint."""
        hinted = False
        while True:
            try:
                datagram = self._socket.recv(_LARGEST_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return hinted
            except OSError:  # an ICMP error queued on the socket: nothing to read
                continue
            hinted = hinted or datagram == HINT

    def close(self) -> None:
        self._socket.close()


def host_facing(base_url: str) -> str:
    """This machine's address on the route to the node at ``base_url``.

    Clients that reach that node can most likely reach this address too. No
    packet is sent: connecting a UDP socket only picks the route.
    """
    host = urlsplit(base_url).hostname or "127.0.0.1"
    try:
        family, _, _, _, target = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(target)
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


@runtime_checkable
class HintedStore(Protocol):
    """A store whose workers take hints (a cluster's; the embedded store has inotify)."""

    def listen_for_wakeups(self) -> str | None:
        """Start listening; where (host:port), or None when no socket could be had."""
        ...


def hint_address(store: object) -> str | None:
    """Listen for hints on a store that sends them; the address a worker registers, or None."""
    return store.listen_for_wakeups() if isinstance(store, HintedStore) else None


def look_seconds(timeout: float, listener: WakeListener | None) -> float:
    """How long an idle worker on a cluster waits, at most ``timeout``, before it looks again."""
    if listener is None or listener.hinted_within(_AFTER_HINT_SECONDS):
        return min(timeout, _LOOK_SECONDS)
    return min(timeout, _IDLE_LOOK_SECONDS)
