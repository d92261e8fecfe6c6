"""Watching a one-job child process: the wall clock, the output cap, cancellation, messages.

``JobSupervisor.watch`` blocks (the async sandbox runs it in a worker thread)
on one ``select`` over the child's pidfd, control socket and output pipe, and
a wake-up pipe that ``cancel`` writes to from any thread. It returns as soon
as the job is over: the child exited, or the supervisor killed the child's
process group for running too long, writing too much, breaking the protocol,
or being cancelled. A child that costs an interpreter start per job can
afford a thread; pool children are watched from the event loop instead
(``pool_child``). Both end in a ``Supervised``.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import selectors
import threading
import time
from collections.abc import Callable

import msgspec

from taskq.broker.limits import Limits
from taskq.job_context import JobUpdate
from taskq.worker.sandbox import keeper, protocol
from taskq.worker.sandbox.child_process import ChildProcess, Ended
from taskq.worker.sandbox.output import OutputTail
from taskq.worker.sandbox.protocol import READ_CHUNK_BYTES


class EndReason(enum.Enum):
    """Why watching a job stopped."""

    EXITED = "exited"
    """The child exited (or died) by itself."""
    REPORTED = "reported"
    """A pool child sent its result and lives on for the next job."""
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"
    """The child's keeper killed the job: its lease was not renewed in time."""
    CPU_LIMIT = "cpu_limit"
    """The child's keeper killed the job: it used more CPU time than it was given."""
    OUTPUT_LIMIT = "output_limit"
    PROTOCOL_ERROR = "protocol_error"
    NOT_STARTED = "not_started"
    """A job queued in a pool child never started: withdrawn, refused, or the child ended first."""


class Supervised(msgspec.Struct, frozen=True):
    """What watching a job saw; ``decide_outcome`` turns it into an ``Outcome``."""

    reason: EndReason
    report: protocol.ChildReport | None
    ended: Ended | None
    """How the child ended; ``None`` when a pool child lives on."""
    cpu_seconds_at_start: float | None
    """A pool child's CPU time when the job started, to subtract from its lifetime's."""
    output_bytes: int
    log_tail: str
    wall_seconds: float
    protocol_error: str = ""
    stdout: str | None = None
    """A command's stdout apart (a ``shell`` job's): its end, at most the result's size."""
    stdout_truncated: bool = False


class JobSupervisor:
    """Supervises one job from the moment its request is sent until it is over."""

    def __init__(self, limits: Limits, *, on_progress: Callable[[JobUpdate], None] | None) -> None:
        self._limits = limits
        self._on_progress = on_progress
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # Guards the wake pipe: ``cancel`` may race with ``watch`` closing it.
        self._wake_lock = threading.Lock()
        self._closed = False

    def cancel(self) -> None:
        """Kill the job's process group soon; safe from any thread, a no-op once over."""
        with self._wake_lock:
            if not self._closed:
                # A full pipe already holds a request: one is enough.
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_write, b"!")

    def close(self) -> None:
        """Release the wake-up pipe; from now on ``cancel`` does nothing."""
        with self._wake_lock:
            if not self._closed:
                self._closed = True
                os.close(self._wake_read)
                os.close(self._wake_write)

    def watch(self, child: ChildProcess, request: protocol.JobRequest) -> Supervised:
        """Send ``request`` to a one-job ``child`` and block until the job is over.

        The job ends when the child exits, and the child's whole process group
        is killed then, so that no process the job started outlives it. The
        child has been reaped when this returns.
        """
        started = time.monotonic()
        job = _JobWatch(child, self._limits, self._on_progress)
        child.hold_to_cpu(self._limits.cpu_seconds)
        try:
            reason = job.wait(protocol.encode_message(request.to_message()), self._wake_read)
            # Also after EXITED: the job's own children may still be running.
            child.kill_job()
            job.ended = child.reap()
            if reason is EndReason.EXITED:
                reason = keeper_reason(child, reason)
            job.read_leftovers()
        except BaseException:
            child.kill_job()
            raise
        return Supervised(
            reason=reason,
            report=job.report,
            ended=job.ended,
            cpu_seconds_at_start=None,
            output_bytes=job.output.total_bytes,
            log_tail=job.output.text(),
            wall_seconds=time.monotonic() - started,
            protocol_error=job.protocol_error,
            stdout=job.stdout.text() if child.stdout_fd is not None else None,
            stdout_truncated=job.stdout.total_bytes > self._limits.result_bytes,
        )


class _JobWatch:
    """The state of one ``JobSupervisor.watch`` call."""

    def __init__(
        self,
        child: ChildProcess,
        limits: Limits,
        on_progress: Callable[[JobUpdate], None] | None,
    ) -> None:
        self.child = child
        self.limits = limits
        self.on_progress = on_progress
        self.output = OutputTail(limits.log_tail_bytes)
        # As much of a command's stdout as its result may hold.
        self.stdout = OutputTail(limits.result_bytes)
        self.decoder = protocol.decoder_for_results(limits.result_bytes)
        self.report: protocol.ChildReport | None = None
        self.ended: Ended | None = None
        self.protocol_error = ""

    def wait(self, request_frame: bytes, wake_fd: int) -> EndReason:
        """Send the request, then handle the child's messages and output until the job is over.

        Returns why it is over; the child must then be killed (if it still
        lives) and reaped.
        """
        deadline = time.monotonic() + self.limits.wall_seconds
        outbox = request_frame
        with selectors.DefaultSelector() as selector:
            selector.register(self.child.pidfd, selectors.EVENT_READ, "exited")
            selector.register(self.child.output_fd, selectors.EVENT_READ, "output")
            if self.child.stdout_fd is not None:
                selector.register(self.child.stdout_fd, selectors.EVENT_READ, "stdout")
            selector.register(wake_fd, selectors.EVENT_READ, "cancel")
            selector.register(
                self.child.control, selectors.EVENT_READ | selectors.EVENT_WRITE, "control"
            )
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return EndReason.TIMEOUT
                ready = {key.data: events for key, events in selector.select(remaining)}
                # Control first: a result and the exit it precedes can arrive together.
                if "control" in ready:
                    if ready["control"] & selectors.EVENT_WRITE:
                        outbox = self._send(outbox)
                        if not outbox:
                            selector.modify(self.child.control, selectors.EVENT_READ, "control")
                    if ready["control"] & selectors.EVENT_READ:
                        data = _read_now(lambda: self.child.control.recv(READ_CHUNK_BYTES))
                        if data == b"":
                            selector.unregister(self.child.control)
                        elif data:
                            self._handle_messages(data)
                    if self.protocol_error:
                        return EndReason.PROTOCOL_ERROR
                # stdout first: of a command's lines written in turn, its log shows them so.
                for name, fd in (
                    ("stdout", self.child.stdout_fd),
                    ("output", self.child.output_fd),
                ):
                    if name in ready and fd is not None:
                        data = _read_now(functools.partial(os.read, fd, READ_CHUNK_BYTES))
                        if data == b"":
                            selector.unregister(fd)
                        elif data:
                            self._feed(fd, data)
                if self.output.total_bytes > self.limits.output_bytes:
                    return EndReason.OUTPUT_LIMIT
                if "cancel" in ready:
                    return EndReason.CANCELLED
                if "exited" in ready:
                    return EndReason.EXITED

    def read_leftovers(self) -> None:
        """Read what the job left in the pipes once it is over.

        The child is dead by now, so its pipes end; the output cap still
        bounds the read in case a process that escaped the group keeps writing.
        """
        while self.report is None and not self.protocol_error:
            data = _read_now(lambda: self.child.control.recv(READ_CHUNK_BYTES))
            if not data:
                break
            self._handle_messages(data)
        for fd in (self.child.stdout_fd, self.child.output_fd):
            while fd is not None and self.output.total_bytes <= self.limits.output_bytes:
                data = _read_now(functools.partial(os.read, fd, READ_CHUNK_BYTES))
                if not data:
                    break
                self._feed(fd, data)

    def _feed(self, fd: int, data: bytes) -> None:
        """Output read from the job: all of it to the log, a command's stdout to its result too."""
        self.output.feed(data)
        if fd == self.child.stdout_fd:
            self.stdout.feed(data)

    def _send(self, outbox: bytes) -> bytes:
        try:
            sent = self.child.control.send(outbox)
        except BlockingIOError:
            return outbox
        except OSError:
            return b""  # The child is gone; its pidfd will say so.
        return outbox[sent:]

    def _handle_messages(self, data: bytes) -> None:
        try:
            latest_progress = None
            for message in self.decoder.feed(data):
                if message["type"] == "progress":
                    latest_progress = protocol.parse_progress(message)
                elif message["type"] == "result":
                    self.report = protocol.parse_report(message)
                else:
                    raise protocol.ProtocolError(f"unexpected message type {message['type']!r}")
        except protocol.ProtocolError as exc:
            self.protocol_error = str(exc)
            return
        # Only the newest of a burst of reports is worth passing on.
        if latest_progress is not None and self.on_progress is not None:
            self.on_progress(latest_progress)


def keeper_reason(child: ChildProcess, otherwise: EndReason) -> EndReason:
    """Why a child ended, when its keeper ended it (see ``keeper``); else ``otherwise``."""
    said = child.ended_by_keeper()
    if said == keeper.LEASE_ENDED:
        return EndReason.LEASE_EXPIRED
    if said == keeper.WALL_CLOCK_ENDED:
        return EndReason.TIMEOUT
    if said == keeper.CPU_ENDED:
        return EndReason.CPU_LIMIT
    return otherwise


def _read_now(read: Callable[[], bytes]) -> bytes | None:
    """Read without blocking: the data, ``b""`` at end of stream, ``None`` if nothing is there."""
    try:
        return read()
    except BlockingIOError:
        return None
    except ConnectionResetError:
        return b""
