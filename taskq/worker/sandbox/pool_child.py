"""A sandbox child watched from the event loop: a job costs one message each way.

The child's control socket, output pipes and pidfd are registered with the
event loop once, for the child's whole life. A job is then a frame sent, a
timer for its wall clock and a future that the first of these settles: the
child's result, its exit, too much output, a broken message, a stop request
or the timer. No thread and no task per job: at thousands of jobs a second
the hand-offs a thread needs cost more than the jobs themselves.

A pool child runs job after job. Jobs may be sent while one is running
(``submit``, then ``finish`` each in turn): the child queues them, and
starts the next the moment one ends, without waiting for the worker to hear
of it. The first job in flight is the one running; its wall clock starts
when the one before it reports. A job sent behind another is announced by a
marker in the output pipe when it starts, so each job's output stays its
own (``output_pipes``). A stop request for a queued job withdraws it; if the
child had already started it (its marker says so) the child is killed, as
for a running job. Jobs still queued when the child dies or is killed end
``NOT_STARTED``, for the sandbox to run in a fresh child.

A fresh child runs one job (``spawn_for_one``) and exits: its result does
not end the job, its exit does, and the job is judged by both. It is
watched the same way, so process isolation and the pool share one watcher.

The worker runs on anyio's asyncio backend, and this uses that loop's
reader callbacks directly (anyio has no persistent fd watch).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import anyio

from taskq.broker.limits import Limits
from taskq.job_context import JobUpdate
from taskq.worker.sandbox import protocol
from taskq.worker.sandbox.child_process import (
    KEEPER_PATIENCE_SECONDS,
    ChildProcess,
    ChildSetup,
    Ended,
    Mode,
)
from taskq.worker.sandbox.output import OutputTail
from taskq.worker.sandbox.output_pipes import OutputPipes
from taskq.worker.sandbox.payloads import ShellPayload
from taskq.worker.sandbox.pool_job import PoolJob
from taskq.worker.sandbox.rlimits import POOL_CPU_ROUNDING_SECONDS
from taskq.worker.sandbox.stopping import StopRequest
from taskq.worker.sandbox.supervision import EndReason, Supervised, keeper_reason

# All a one-job child has to say: it never waits for a job, nor turns one away.
_ONE_JOB_SAYS = ("progress", "result")


class PoolChild:
    """A child process running the jobs sent to it in order (or just one), watched by the loop."""

    def __init__(self, child: ChildProcess, ceiling: Limits, *, one_job: bool = False) -> None:
        """Watch ``child``; ``ceiling`` bounds its results; ``one_job``: it exits after one."""
        self._child = child
        self._loop = asyncio.get_running_loop()
        self._one_job = one_job
        self._ready_heard = False
        self._decoder = protocol.decoder_for_results(ceiling.result_bytes)
        # In the order sent, which is the order the child runs them: the first is running.
        self._in_flight: dict[int, PoolJob] = {}
        self._next_seq = 1
        self._outbox = b""
        self._last_request: protocol.JobRequest | None = None  # what the child last received
        # The child's CPU total before the next job: from its ``ready`` message,
        # then from each result. A job that dies is charged its lifetime total minus this.
        self._cpu_before_job = 0.0
        self._exit: asyncio.Future[None] = self._loop.create_future()
        self._ended: Ended | None = None
        self._fault = ""  # a message that came with no job running
        self._doomed = False  # being killed, or unfit for more jobs: send it none
        self._closed = False
        self._loop.add_reader(child.control.fileno(), self._read_control)
        self._output = OutputPipes(child, self._loop, marks=not one_job)
        self._loop.add_reader(child.pidfd, self._on_exit)

    @classmethod
    async def spawn(cls, ceiling: Limits, setup: ChildSetup) -> PoolChild:
        """Start a pool child whose hard limits are ``ceiling``."""
        # Starting a process blocks for milliseconds: not in the event loop's thread.
        child = await asyncio.wrap_future(ChildProcess.spawn("pool", setup, ceiling=ceiling))
        return cls(child, ceiling)

    @classmethod
    async def spawn_for_one(cls, request: protocol.JobRequest, setup: ChildSetup) -> PoolChild:
        """Start a fresh child for ``request`` alone, under hard limits that are the job's.

        A ``shell`` command replaces the child (exec mode), keeping its pid,
        process group and limits; its stdout comes apart, as its result.
        """
        mode: Mode = "exec" if isinstance(request.payload, ShellPayload) else "once"
        child = await asyncio.wrap_future(ChildProcess.spawn(mode, setup))
        return cls(child, request.limits, one_job=True)

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def in_flight(self) -> int:
        """Jobs sent and not yet over in the child."""
        return len(self._in_flight)

    def accepting(self) -> bool:
        """Whether jobs may be queued here, as far as the loop has heard.

        No syscall: a child that died unnoticed still ends a queued job
        ``NOT_STARTED`` (its marker never came), so it is run elsewhere.
        """
        return not self._exit.done() and not self._fault and not self._doomed

    def usable(self) -> bool:
        """Whether the child can take a job to start at once: accepting, and still alive."""
        # Checked before a job that is not queued: a death between jobs would be blamed on it.
        return self.accepting() and not self._child.has_exited()

    async def run(
        self,
        request: protocol.JobRequest,
        *,
        stop: StopRequest | None,
        on_progress: Callable[[JobUpdate], None] | None,
        on_output: Callable[[bytes], None] | None = None,
    ) -> Supervised:
        """Send ``request`` and wait until the job is over; see ``Sandbox.run``."""
        return await self.finish(
            self.submit(request, stop=stop, on_progress=on_progress, on_output=on_output)
        )

    def submit(
        self,
        request: protocol.JobRequest,
        *,
        stop: StopRequest | None,
        on_progress: Callable[[JobUpdate], None] | None,
        on_output: Callable[[bytes], None] | None = None,
    ) -> PoolJob:
        """Send ``request`` to the child, behind any jobs it has; ``finish`` waits for it.

        The frame goes out at the end of this pass of the event loop, with any
        others sent meanwhile. Setting ``stop`` ends the job ``CANCELLED`` (a
        queued one is withdrawn). ``on_output`` is handed the job's output as it is read.
        """
        # State the loop's callbacks change, so the caller's check still holds.
        if not self.accepting():
            raise RuntimeError("a pool child that cannot take jobs was sent one")
        # A job's output is only its own once the pipe's earlier bytes are read.
        marked = bool(self._in_flight) or self._output.may_hold_earlier_output()
        job = PoolJob(
            self._next_seq,
            request.limits,
            on_progress,
            self._loop.create_future(),
            OutputTail(request.limits.log_tail_bytes),
            marked,
            # As much of a command's stdout as its result may hold.
            stdout=None
            if self._child.stdout_fd is None
            else OutputTail(request.limits.result_bytes),
            on_output=on_output,
        )
        self._next_seq += 1
        message = request.to_message(previous=self._last_request)
        message["seq"] = job.seq
        if marked:
            message["mark"] = True
        self._output.job_sent(job)
        self._in_flight[job.seq] = job
        if len(self._in_flight) == 1:
            self._begin(job)
        # Alone in flight: the child is idle, waiting for it.
        self._send(protocol.encode_message(message), at_once=len(self._in_flight) == 1)
        self._last_request = request
        if stop is not None:
            job.unhook_stop = stop.on_set(lambda: self._stop(job))
        return job

    async def finish(self, job: PoolJob) -> Supervised:
        """Wait until ``job`` is over; how it went.

        Unless a pool child reported a result (or never started the job), it
        is killed with its process group, and reaped, by the time this returns
        or raises.
        """
        try:
            try:
                reason = await job.over
            finally:
                self._let_go(job)
            if reason is EndReason.NOT_STARTED:
                return Supervised(reason, None, None, None, 0, "", 0.0)
            if reason is not EndReason.REPORTED or job.progress_error is not None:
                # Also after EXITED: the job's own processes may still be running.
                await self._kill_and_reap()
            if not self._closed:  # else its pipes are gone, and what they held with them
                self._output.collect(job)
        except BaseException:
            # The caller was cancelled: the job must not outlive the call.
            with anyio.CancelScope(shield=True):
                await self._kill_and_reap()
            raise
        if job.progress_error is not None:
            raise job.progress_error
        return Supervised(
            reason=reason,
            report=job.report,
            ended=None if reason is EndReason.REPORTED else self._ended,
            cpu_seconds_at_start=job.cpu_before,
            output_bytes=job.output.total_bytes,
            log_tail=job.output.text(),
            wall_seconds=time.monotonic() - job.started,
            protocol_error=job.protocol_error,
            stdout=None if job.stdout is None else job.stdout.text(),
            stdout_truncated=job.stdout is not None
            and job.stdout.total_bytes > job.limits.result_bytes,
        )

    async def aclose(self) -> None:
        """Kill and reap the child (it holds no state worth a graceful exit); release its fds."""
        with anyio.CancelScope(shield=True):
            await self._kill_and_reap()
        if not self._closed:
            self._closed = True
            self._child.close()

    def withdraw_now(self, job: PoolJob) -> bool:
        """Take back ``job``, queued behind the running one, certain the child never starts it.

        The withdrawal goes out at once, then whatever the child has sent is
        read. The child reads every message waiting for it before it starts
        a queued job, and sends the running job's result before that: if no
        result has come, the withdrawal is there before the child could start
        ``job``, which is over now (``NOT_STARTED``; it stays in flight until
        the child's ``withdrawn`` comes). False when that cannot be known, or
        ``job`` is not queued: stop it as usual then.
        """
        front = next(iter(self._in_flight.values()), None)
        if (
            job.over.done()
            or front is None
            or front is job
            or job.seq not in self._in_flight
            or self._ended is not None
        ):
            return False
        if not job.withdrawing:
            job.withdrawing = True
            self._send(protocol.encode_message({"type": "withdraw", "seq": job.seq}))
        self._send_some()
        if self._outbox:
            return False  # not all of it is in the child's socket yet
        self._read_control(until_empty=True)
        if front.over.done() or job.seen_starting:
            return False
        job.end(EndReason.NOT_STARTED)
        return True

    # -- the jobs in flight

    def _begin(self, job: PoolJob) -> None:
        """``job`` is first in line: the child is running it, or is about to."""
        job.started = time.monotonic()
        job.cpu_before = self._cpu_before_job
        if self._one_job:
            self._child.hold_to_cpu(job.limits.cpu_seconds)
        elif self._ready_heard:
            # Not before ``ready``: the keeper would count the child's imports
            # as the job's CPU time, which RLIMIT_CPU does not.
            self._child.hold_to_cpu(job.limits.cpu_seconds + POOL_CPU_ROUNDING_SECONDS)
        job.timer = self._loop.call_later(job.limits.wall_seconds, job.end, EndReason.TIMEOUT)

    def _let_go(self, job: PoolJob) -> None:
        # Dropped, not just called: the hook and the timer refer back to the job,
        # and a cycle per job would leave thousands a second to the cyclic collector.
        self._cancel_timer(job)
        unhook, job.unhook_stop = job.unhook_stop, None
        if unhook is not None:
            unhook()

    @staticmethod
    def _cancel_timer(job: PoolJob) -> None:
        timer, job.timer = job.timer, None
        if timer is not None:
            timer.cancel()

    def _stop(self, job: PoolJob) -> None:
        if job.over.done():
            return
        if next(iter(self._in_flight.values()), None) is job or not job.marked:
            job.end(EndReason.CANCELLED)
        elif not job.withdrawing:
            job.withdrawing = True
            self._send(protocol.encode_message({"type": "withdraw", "seq": job.seq}))

    def _running(self, kind: str) -> PoolJob:
        """The first job in flight, which a ``kind`` message just came from."""
        running = next(iter(self._in_flight.values()), None)
        if running is None:
            raise protocol.ProtocolError(f"a {kind!r} message with no job running")
        return running

    def _front_is_over(self, kind: str, seq: int | None) -> PoolJob:
        """The first job in flight, which ``kind`` (a result or withdrawal) has just ended."""
        if not self._in_flight:
            raise protocol.ProtocolError(f"a {kind!r} message with no job running")
        job = next(iter(self._in_flight.values()))
        if seq is not None and seq != job.seq:
            raise protocol.ProtocolError(f"a {kind!r} message for job {seq}, not {job.seq}")
        del self._in_flight[job.seq]
        if kind == "withdrawn":
            self._output.job_withdrawn(job)
        # else its marker, written before it ran, may still be in the pipe.
        self._cancel_timer(job)
        if self._in_flight:
            self._begin(next(iter(self._in_flight.values())))
        return job

    # -- the child's end of things

    async def _kill_and_reap(self) -> Ended:
        self._doomed = True
        if self._ended is None:
            self._child.kill_job()
            # The keeper sweeps the job's processes, then exits; one that has
            # not in time is killed outright, without blocking the loop.
            with anyio.move_on_after(KEEPER_PATIENCE_SECONDS):
                await self._exit
            self._stop_watching()
            self._ended = self._child.reap(patience=0)
        return self._ended

    def _stop_watching(self) -> None:
        self._loop.remove_reader(self._child.control.fileno())
        self._output.stop_watching()
        self._loop.remove_reader(self._child.pidfd)
        self._loop.remove_writer(self._child.control.fileno())

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._child.pidfd)
        self._doomed = True
        # A result sent just before the exit counts: read it before the exit does.
        self._read_control(until_empty=True)
        # And the markers: they tell the queued jobs that had started from those that had not.
        self._output.read_after_exit()
        if not self._exit.done():
            self._exit.set_result(None)
        ran = keeper_reason(self._child, EndReason.EXITED)
        for job in self._in_flight.values():
            job.end(ran if job.seen_starting or not job.marked else EndReason.NOT_STARTED)
        self._in_flight.clear()

    # -- the control channel

    def _send(self, frame: bytes, *, at_once: bool = False) -> None:
        # The frames of one pass of the loop go out in one send: a slot topping
        # up its child sends it several jobs in a row, and on a VM each send
        # that wakes a sleeping child costs tens of microseconds on both sides.
        # ``at_once``: a job for an idle child, which would otherwise wait out
        # the rest of the pass (0.2-0.3 ms on a busy loop); jobs queued behind
        # it in the same pass still go together.
        if not self._outbox:
            if at_once:
                self._outbox = frame
                self._send_some()
                # A socket's wake-up is a "sync" one: Linux tends to queue the child
                # on this CPU, behind the rest of the loop's pass. Yielding lets it
                # start the job now (0.17 against 0.39-0.45 ms from the send to the
                # child's read, traced); where it went to another CPU this is a
                # syscall that changes nothing.
                os.sched_yield()
                return
            self._loop.call_soon(self._send_some)
        # else a send is already due: the one scheduled, or the writer's.
        self._outbox += frame

    def _send_some(self) -> None:
        if self._ended is not None or self._closed:
            self._outbox = b""  # reaped: nobody left to read it
            return
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
        # By job (its seq): one read may hold the last words of several short jobs.
        latest_progress: dict[int, tuple[PoolJob, JobUpdate]] = {}
        try:
            for message in self._decoder.feed(data):
                kind = message["type"]
                if self._one_job and kind not in _ONE_JOB_SAYS:
                    raise protocol.ProtocolError(f"unexpected message type {kind!r}")
                if kind == "ready":
                    if self._ready_heard:
                        # The child says it once, as it starts: a second is a job's
                        # own, written to restart its wall clock.
                        raise protocol.ProtocolError("a second 'ready' message")
                    self._ready_heard = True
                    self._cpu_before_job = protocol.parse_ready(message)
                    first = next(iter(self._in_flight.values()), None)
                    if first is not None:
                        # Sent while the interpreter was starting: the job's wall
                        # clock (its time limit, and the run time the worker
                        # learns job lengths from) and its CPU count start now.
                        self._cancel_timer(first)
                        self._begin(first)
                elif kind == "result":
                    report = protocol.parse_report(message)
                    if self._one_job:
                        # Its job is over when it exits, just after: its exit is judged too.
                        self._running(kind).report = report
                        continue
                    seq = message.get("seq")  # none in the frame of a child out of memory
                    job = self._front_is_over(
                        kind, None if seq is None else protocol.parse_seq(message)
                    )
                    if report.cpu_total_seconds is not None:
                        self._cpu_before_job = report.cpu_total_seconds
                    if not job.over.done():
                        job.report = report
                        job.end(EndReason.REPORTED)
                elif kind == "withdrawn":
                    job = self._front_is_over(kind, protocol.parse_seq(message))
                    if not job.withdrawing:
                        self._doomed = True  # it stopped taking jobs: it is unfit for more
                    job.end(EndReason.NOT_STARTED)
                elif kind == "progress":
                    job = self._running(kind)
                    if not job.over.done():
                        latest_progress[job.seq] = (job, protocol.parse_progress(message))
                else:
                    raise protocol.ProtocolError(f"unexpected message type {kind!r}")
        except protocol.ProtocolError as exc:
            self._doomed = True
            running = next(iter(self._in_flight.values()), None)
            if running is None or running.over.done():
                self._fault = str(exc)
            else:
                running.protocol_error = str(exc)
                running.end(EndReason.PROTOCOL_ERROR)
            return
        # Only the newest of a burst of a job's reports is worth passing on.
        for job, update in latest_progress.values():
            if job.on_progress is not None:
                try:
                    job.on_progress(update)
                except BaseException as exc:
                    job.progress_error = exc
                    job.end(EndReason.CANCELLED)
