"""One job sent to a child watched from the event loop, from its request until it is over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from taskq.broker.limits import Limits
from taskq.job_context import JobUpdate
from taskq.worker.sandbox import protocol
from taskq.worker.sandbox.output import OutputTail
from taskq.worker.sandbox.supervision import EndReason


class PoolJob(msgspec.Struct, eq=False, weakref=True):
    """A job in a child (see ``pool_child``): what the child said of it, and how it is going.

    Weakly referable: a test holds a finished job by a weak reference, to show
    that nothing keeps it (a reference cycle would, until the collector ran).
    """

    seq: int
    limits: Limits
    on_progress: Callable[[JobUpdate], None] | None
    over: asyncio.Future[EndReason]
    output: OutputTail
    marked: bool
    """Sent behind another job: the child marks its start in the output."""
    stdout: OutputTail | None = None
    """A command's stdout apart (an exec child's): its end, as much as its result may hold."""
    on_output: Callable[[bytes], None] | None = None
    """Called with each piece of its output as it is read (stdout and stderr as one)."""
    report: protocol.ChildReport | None = None
    protocol_error: str = ""
    progress_error: BaseException | None = None
    started: float = 0.0
    """When it came to the front of the child's queue (its wall clock's start)."""
    cpu_before: float = 0.0
    """The child's CPU total then: what a job that dies is charged from."""
    timer: asyncio.TimerHandle | None = None
    unhook_stop: Callable[[], None] | None = None
    withdrawing: bool = False
    seen_starting: bool = False
    """Its marker came: the child started it."""
    output_closed: bool = False
    """A later job's marker came: all its output has been read."""
    output_collected: bool = False

    def end(self, reason: EndReason) -> None:
        """The job is over for ``reason``; the first reason given stands."""
        if not self.over.done():
            self.over.set_result(reason)
