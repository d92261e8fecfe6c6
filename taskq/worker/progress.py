"""Progress reports from inside a running job to the worker that runs it.

A job function calls ``report(0.4, "resized 40 of 100 images")``; the sandbox
child forwards it over the control channel and the worker hands it to the
``on_progress`` callback given to ``Sandbox.run``. Outside a sandbox, for
example when a test calls the job function directly, reports go nowhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec

MAX_MESSAGE_CHARS = 1000


class Progress(msgspec.Struct, frozen=True):
    """How far a job has got: ``fraction`` from 0.0 to 1.0 and a short message."""

    fraction: float
    message: str = ""


_send: Callable[[Progress], None] | None = None
# Held while sending, so that once ``attach(None)`` returns no report from a
# job's leftover thread can follow the job's result down the channel.
_lock = threading.Lock()


def report(fraction: float, message: str = "") -> None:
    """Tell the worker how far the current job has got; callable from any thread."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"progress fraction must be between 0 and 1, not {fraction}")
    with _lock:
        if _send is not None:
            _send(Progress(float(fraction), str(message)[:MAX_MESSAGE_CHARS]))


def attach(send: Callable[[Progress], None] | None) -> None:
    """Route reports to ``send`` (the sandbox child does this around each job); ``None`` stops."""
    global _send
    with _lock:
        _send = send
