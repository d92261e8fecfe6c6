"""Ctrl-Z stops a worker between its writes to the embedded store, never inside one.

A process stopped inside a write to an SQLite file holds that file's write
lock until it runs again: every other worker and client of the store waits,
for as long as the stopped worker's terminal leaves it stopped. So on
SIGTSTP (Ctrl-Z, ``kill -TSTP``) the worker first holds its own writes off,
waiting for the one under way, and only then stops itself (SIGSTOP, which
cannot be caught); SIGCONT (``fg``) lets it go on, and its writes with it.
Its jobs run on meanwhile under their keepers, which stop each one at its
lease's end, as they would under any freeze. A store whose writes hold
nothing (a cluster) is stopped at once, as SIGTSTP always did.

SIGSTOP sent from outside is not a request and cannot be caught: one that
lands inside a write holds the embedded store up (docs/stores.md).
"""

from __future__ import annotations

import os
import signal
from contextlib import nullcontext

import anyio

from taskq.broker.stores.store import WriteHoldingStore


def stop_between_writes(store: object) -> None:
    """Stop this process (until SIGCONT) at a moment no write of it to ``store`` is under way."""
    held = store.writes_held() if isinstance(store, WriteHoldingStore) else nullcontext()
    with held:
        os.kill(os.getpid(), signal.SIGSTOP)


async def stop_between_writes_on_sigtstp(store: object) -> None:
    """For the worker's life: each SIGTSTP stops it as :func:`stop_between_writes` does.

    The wait for a write under way blocks the event loop, for that write's
    length at most: nothing the loop would do meanwhile may write anyway.
    """
    with anyio.open_signal_receiver(signal.SIGTSTP) as signals:
        async for _ in signals:
            stop_between_writes(store)
