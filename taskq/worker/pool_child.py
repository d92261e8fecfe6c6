"""A pool child watched from the event loop: a job costs one message each way.

The child's control socket, output pipe and pidfd are registered with the
event loop once, for the child's whole life. A job is then a frame sent, a
timer for its wall clock and a future that the first of these settles: the
child's result, its exit, too much output, a broken message, a stop request
or the timer. No thread and no task per job: at thousands of jobs a second
the hand-offs a thread needs cost more than the jobs themselves.

The worker runs on anyio's asyncio backend, and this uses that loop's
reader callbacks directly (anyio has no persistent fd watch).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from taskq.broker.limits import Limits
from taskq.worker import protocol
from taskq.worker.child_process import ChildProcess, Ended
from taskq.worker.output import OutputTail
from taskq.worker.progress import Progress
from taskq.worker.stopping import StopRequest
from taskq.worker.supervision import EndReason, Supervised


@dataclass
class _Job:
    """One job in the pool child, from its request until it is over."""

    limits: Limits
    on_progress: Callable[[Progress], None] | None
    over: asyncio.Future[EndReason]
    output: OutputTail
    report: protocol.ChildReport | None = None
    protocol_error: str = ""
    progress_error: BaseException | None = None
    started: float = field(default_factory=time.monotonic)

    def end(self, reason: EndReason) -> None:
        """The job is over for ``reason``; the first reason given stands."""
        if not self.over.done():
            self.over.set_result(reason)


class PoolChild:
    """One pool child process, running one job at a time, watched by the event loop."""

    def __init__(self, child: ChildProcess, ceiling: Limits) -> None:
        self._child = child
        self._loop = asyncio.get_running_loop()
        self._decoder = protocol.decoder_for_results(ceiling.result_bytes)
        self._job: _Job | None = None
        self._outbox = b""
        self._last_request: protocol.JobRequest | None = None  # what the child last received
        # The child's CPU total before the next job: from its ``ready`` message,
        # then from each result. A job that dies is charged its lifetime total minus this.
        self._cpu_before_job = 0.0
        self._exit: asyncio.Future[None] = self._loop.create_future()
        self._ended: Ended | None = None
        self._fault = ""  # a message that came with no job running
        self._loop.add_reader(child.control.fileno(), self._read_control)
        self._loop.add_reader(child.output_fd, self._read_output)
        self._loop.add_reader(child.pidfd, self._on_exit)

    @classmethod
    async def spawn(cls, ceiling: Limits) -> PoolChild:
        """Start a pool child whose hard limits are ``ceiling``."""
        # Starting a process blocks for milliseconds: not in the event loop's thread.
        child = await anyio.to_thread.run_sync(lambda: ChildProcess.spawn("pool", ceiling=ceiling))
        return cls(child, ceiling)

    @property
    def pid(self) -> int:
        return self._child.pid

    def usable(self) -> bool:
        """Whether the child can take another job: alive, and it kept to the protocol."""
        return not self._exit.done() and not self._fault and not self._child.has_exited()

    async def run(
        self,
        request: protocol.JobRequest,
        *,
        stop: StopRequest | None,
        on_progress: Callable[[Progress], None] | None,
    ) -> Supervised:
        """Send ``request`` and wait until the job is over; see ``Sandbox.run``.

        Unless the child reported a result, it is killed (with its process
        group) and reaped by the time this returns or raises.
        """
        if self._job is not None:
            raise RuntimeError("a pool child runs one job at a time")
        job = _Job(
            request.limits,
            on_progress,
            self._loop.create_future(),
            OutputTail(request.limits.log_tail_bytes),
        )
        self._job = job
        timer = self._loop.call_later(request.limits.wall_seconds, job.end, EndReason.TIMEOUT)
        withdraw = stop.on_set(lambda: job.end(EndReason.CANCELLED)) if stop else None
        try:
            self._send(protocol.encode_message(request.to_message(previous=self._last_request)))
            self._last_request = request
            try:
                reason = await job.over
            finally:
                timer.cancel()
                if withdraw is not None:
                    withdraw()
            if reason is not EndReason.REPORTED or job.progress_error is not None:
                # Also after EXITED: the job's own processes may still be running.
                await self._kill_and_reap()
            self._read_leftover_output(job)
        except BaseException:
            # The caller was cancelled: the job must not outlive the call.
            with anyio.CancelScope(shield=True):
                await self._kill_and_reap()
            raise
        finally:
            self._job = None
        if job.progress_error is not None:
            raise job.progress_error
        cpu_before_job = self._cpu_before_job
        if job.report is not None and job.report.cpu_total_seconds is not None:
            self._cpu_before_job = job.report.cpu_total_seconds
        return Supervised(
            reason=reason,
            report=job.report,
            ended=None if reason is EndReason.REPORTED else self._ended,
            cpu_seconds_at_start=cpu_before_job,
            output_bytes=job.output.total_bytes,
            log_tail=job.output.text(),
            wall_seconds=time.monotonic() - job.started,
            protocol_error=job.protocol_error,
        )

    async def aclose(self) -> None:
        """Kill and reap the child (it holds no state worth a graceful exit); release its fds."""
        with anyio.CancelScope(shield=True):
            await self._kill_and_reap()
        self._child.close()

    # -- the child's end of things

    async def _kill_and_reap(self) -> Ended:
        if self._ended is None:
            self._child.kill_group()
            await self._exit
            self._stop_watching()
            self._ended = self._child.reap()
        return self._ended

    def _stop_watching(self) -> None:
        self._loop.remove_reader(self._child.control.fileno())
        self._loop.remove_reader(self._child.output_fd)
        self._loop.remove_reader(self._child.pidfd)
        self._loop.remove_writer(self._child.control.fileno())

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._child.pidfd)
        # A result sent just before the exit counts: read it before the exit does.
        self._read_control(until_empty=True)
        if not self._exit.done():
            self._exit.set_result(None)
        if self._job is not None:
            self._job.end(EndReason.EXITED)

    # -- the control channel

    def _send(self, frame: bytes) -> None:
        self._outbox = frame
        self._send_some()

    def _send_some(self) -> None:
        try:
            sent = self._child.control.send(self._outbox)
        except BlockingIOError:
            sent = 0
        except OSError:
            sent = len(self._outbox)  # the child is gone; its pidfd will say so
        self._outbox = self._outbox[sent:]
        fd = self._child.control.fileno()
        if self._outbox:
            self._loop.add_writer(fd, self._send_some)
        else:
            self._loop.remove_writer(fd)

    def _read_control(self, *, until_empty: bool = False) -> None:
        while True:
            try:
                data = self._child.control.recv(protocol.READ_CHUNK_BYTES)
            except BlockingIOError:
                return
            except ConnectionResetError:
                data = b""
            if not data:
                self._loop.remove_reader(self._child.control.fileno())
                return
            self._handle_messages(data)
            # A short read has probably emptied the socket; if not, the reader fires again.
            if len(data) < protocol.READ_CHUNK_BYTES and not until_empty:
                return

    def _handle_messages(self, data: bytes) -> None:
        job = self._job
        latest_progress = None
        try:
            for message in self._decoder.feed(data):
                kind = message["type"]
                if kind == "ready":
                    self._cpu_before_job = protocol.parse_ready(message)
                elif job is None or job.over.done():
                    raise protocol.ProtocolError(f"a {kind!r} message with no job running")
                elif kind == "progress":
                    latest_progress = protocol.parse_progress(message)
                elif kind == "result":
                    job.report = protocol.parse_report(message)
                    job.end(EndReason.REPORTED)
                else:
                    raise protocol.ProtocolError(f"unexpected message type {kind!r}")
        except protocol.ProtocolError as exc:
            if job is None or job.over.done():
                self._fault = str(exc)
            else:
                job.protocol_error = str(exc)
                job.end(EndReason.PROTOCOL_ERROR)
            return
        # Only the newest of a burst of reports is worth passing on.
        if latest_progress is not None and job is not None and job.on_progress is not None:
            try:
                job.on_progress(latest_progress)
            except BaseException as exc:
                job.progress_error = exc
                job.end(EndReason.CANCELLED)

    # -- the output pipe

    def _read_output(self) -> None:
        try:
            data = os.read(self._child.output_fd, protocol.READ_CHUNK_BYTES)
        except BlockingIOError:
            return
        if not data:
            self._loop.remove_reader(self._child.output_fd)
            return
        job = self._job
        if job is None:
            return  # written between jobs, by a thread a job left behind: nobody's output
        job.output.feed(data)
        if job.output.total_bytes > job.limits.output_bytes:
            job.end(EndReason.OUTPUT_LIMIT)

    def _read_leftover_output(self, job: _Job) -> None:
        """Collect what the job wrote that the reader has not seen yet.

        A job's writes finished before its result was sent, so a
        non-blocking read until empty collects all of it; the output cap
        bounds the read in case something keeps writing.
        """
        while job.output.total_bytes <= job.limits.output_bytes:
            try:
                data = os.read(self._child.output_fd, protocol.READ_CHUNK_BYTES)
            except BlockingIOError:
                return
            if not data:
                return
            job.output.feed(data)
