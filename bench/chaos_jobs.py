"""The jobs the chaos run's workers import and run, and the ledger they write.

Workers import this module as ``bench.chaos_jobs`` (the chaos run puts the
directory that holds ``bench/`` on their ``PYTHONPATH`` and names it in their
``modules``), so it holds only the jobs (:func:`work`, the workflows'
failing parent :func:`fail`, and the write probe's :func:`noop`), what they
use, and the names of the variables their processes' environment carries; it
imports nothing but the standard library. The ledger is read, and the run
judged, by :mod:`bench.chaos_verdict`, in the chaos run only.

Every run of :func:`work` or :func:`fail` (an *attempt*: one call of the function, whatever
the store thinks of it) appends lines to a ledger file of the process it runs
in, ``<ledger_dir>/<pid>-<start ticks>.ledger``::

    start <token> <attempt> <time> <pid> <start ticks> <worker tag>
    alive <token> <attempt> <time>
    end <token> <attempt> <time>

``time`` is ``time.time()`` (every process of a chaos run is on one machine,
so the lines of different processes compare directly); ``attempt`` is made
here, new for every call; ``start ticks`` is the process's start time from
``/proc`` (so a pid reused later is not mistaken for this one). An ``alive``
line every :data:`ALIVE_SECONDS` is what shows how long a run lasted when its
process was killed before ``end``: such a run lasted at least until its last
line, and at most :data:`ALIVE_SECONDS` longer.

Each line is one ``write`` to a file opened with ``O_APPEND`` and is far
shorter than ``PIPE_BUF``, so lines never interleave, even if two processes
shared a file. A line is in the kernel's page cache once ``write`` returns:
killing the process afterwards loses nothing.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid

# How often a running job says it is still running: the resolution with which
# a killed run's end is known (the chaos summary states it).
ALIVE_SECONDS = 0.25
# The variable naming the worker (its chaos tag) that runs the job.
WORKER_ENV = "CHAOS_WORKER"
# The variable that marks every process of a chaos run, to find any left behind.
RUN_ENV = "CHAOS_RUN"

_ledger: tuple[int, int] | None = None  # (pid, fd) of this process's ledger file


def expected_digest(token: str) -> str:
    """The digest a correct run of ``work(token, ...)`` returns."""
    return hashlib.sha256(f"chaos:{token}".encode()).hexdigest()


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` in clock ticks, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19])


def _ledger_fd(ledger_dir: str) -> int:
    """This process's ledger file, opened once (a pool child runs many jobs)."""
    global _ledger
    pid = os.getpid()
    if _ledger is None or _ledger[0] != pid:  # a forked child gets a file of its own
        name = f"{pid}-{process_start_ticks(pid)}.ledger"
        fd = os.open(os.path.join(ledger_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _ledger = (pid, fd)
    return _ledger[1]


def _line(fd: int, *fields: object) -> None:
    os.write(fd, (" ".join(str(field) for field in fields) + "\n").encode())


def _run(token: str, seconds: float, ledger_dir: str) -> str:
    """Work for ``seconds`` (sleeping, with a little CPU), leaving start/alive/end lines.

    Returns the attempt id, new for every call, which ties what the store
    keeps of the run (a result, an error) to its ledger lines.
    """
    fd = _ledger_fd(ledger_dir)
    attempt = uuid.uuid4().hex[:16]
    pid = os.getpid()
    worker = os.environ.get(WORKER_ENV, "-") or "-"
    _line(fd, "start", token, attempt, f"{time.time():.6f}", pid, process_start_ticks(pid), worker)
    deadline = time.monotonic() + seconds
    digest = expected_digest(token)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(left, ALIVE_SECONDS))
        # A little CPU, so that runs compete for the cores as well as the store.
        for _ in range(200):
            hashlib.sha256(digest.encode()).digest()
        if deadline - time.monotonic() > 0:
            _line(fd, "alive", token, attempt, f"{time.time():.6f}")
    _line(fd, "end", token, attempt, f"{time.time():.6f}")
    return attempt


def work(token: str, seconds: float, ledger_dir: str) -> dict[str, object]:
    """Work for ``seconds``, leaving ledger lines; the token's digest and the attempt id.

    The digest is what the chaos run checks the stored result against.
    """
    attempt = _run(token, seconds, ledger_dir)
    return {"digest": expected_digest(token), "attempt": attempt, "pid": os.getpid()}


class ChaosFailure(ValueError):
    """What :func:`fail` raises: a workflow parent that fails for good."""


# How a failure names its run in the stored error's message (the verdict reads it back).
FAILURE_MESSAGE = "chaos failure of {token}, attempt {attempt}"


def fail(token: str, seconds: float, ledger_dir: str) -> None:
    """Work as :func:`work` does, then fail: the chaos run's workflow parents that fail.

    The chaos run submits it with a retry policy that does not retry
    ``ValueError``, so the job ends ``failed`` after its first complete run,
    and the workflow's children that do not run anyway end cancelled.
    """
    attempt = _run(token, seconds, ledger_dir)
    raise ChaosFailure(FAILURE_MESSAGE.format(token=token, attempt=attempt))


def noop() -> None:
    """The write probe's job: enqueued on a queue no worker takes from, never run."""
