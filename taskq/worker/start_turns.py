"""Workers of one store on one machine starting in turns, not all at once.

A worker's start is CPU and nothing else (Python, its imports, its store, its
first pool child's imports beside them), and it keeps two CPUs busy: the
worker's and its first child's. Workers launched together on a machine of
few cores share those CPUs, and all of them finish starting late: on 2 cores,
two workers launched onto a backlog gave their first result 240 ms after the
launch, and 184 ms when the second started once the first had
(``bench.first_result``, 20 launches each, issue 44).

So a worker starts while it holds a start turn: one of ``cpus // 2`` lock
files (at least one) named after its store, in the user's turn folder
(:mod:`taskq.turn_folder`), ``cpus`` being those it may run on. It gives the
turn back once its first report is written, or shortly after it registered
if no job comes first (``Worker.run``), or when it stops. Workers of other
stores start beside it, as they would use other cores' worth of jobs anyway.

The turn only orders starts; nothing depends on it. A worker that cannot
have one within :data:`LONGEST_WAIT_SECONDS` (its holder frozen mid-start,
say) starts anyway, as does one with no turn folder of its own or no
``flock``; a dead holder's lock goes with its process.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from pathlib import Path

from taskq.turn_folder import try_lock, turn_folder

# A start takes 0.1-0.3 s on 2 cores, longer with every core busy.
LONGEST_WAIT_SECONDS = 1.0
_RETRY_SECONDS = 0.002


class StartTurn:
    """A start turn, held from :meth:`take` until :meth:`give_back` (or the process ends)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def take(
        cls,
        store: str,
        *,
        cpus: int | None = None,
        folder: Path | None = None,
        longest_wait: float = LONGEST_WAIT_SECONDS,
    ) -> StartTurn:
        """A turn to start a worker of ``store`` (its URL as given), waiting for one if need be.

        ``cpus``: how many the workers share (default: those this process may
        run on). ``folder``: where the locks are (default: the user's turn
        folder). Without a turn within ``longest_wait``, one not held.
        """
        folder = folder or turn_folder()
        if folder is None:
            return cls(None)
        turns = max(1, (cpus or len(os.sched_getaffinity(0))) // 2)
        # A digest, not the URL: a URL may hold a password. A collision only
        # makes the workers of two stores take turns together.
        name = f"start-{zlib.crc32(store.encode()):08x}"
        fds = []
        try:
            for number in range(turns):
                flags = os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC
                fds.append(os.open(folder / f"{name}-{number}.turn", flags, 0o600))
        except OSError:
            _close(fds)
            return cls(None)
        deadline = time.monotonic() + longest_wait
        while True:
            for fd in fds:
                taken = try_lock(fd)
                if taken is not None:  # taken, or no flock here (no turns)
                    _close([other for other in fds if other != fd])
                    if not taken:
                        _close([fd])
                        return cls(None)
                    return cls(fd)
            if time.monotonic() >= deadline:
                _close(fds)
                return cls(None)
            time.sleep(_RETRY_SECONDS)

    def give_back(self) -> None:
        """Let the next worker start; a no-op once given back, or never held."""
        if self._fd is not None:
            _close([self._fd])
            self._fd = None


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
