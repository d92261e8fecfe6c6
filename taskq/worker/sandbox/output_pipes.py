"""A child's output pipes, read from the event loop: each byte goes to the job that wrote it.

A child's stdout and stderr share one pipe, except an exec child's, whose
stdout (a command's result) has a pipe of its own; everything read from
either counts against the job's output cap, and a job past it ends
``OUTPUT_LIMIT``. A pool child's jobs share the pipe one after another: a
job sent behind another is announced in it by a marker when it starts (see
``protocol.output_marker``), which says where the output of the job before
ends, and that the child started the job.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from taskq.worker.sandbox import protocol
from taskq.worker.sandbox.child_process import ChildProcess
from taskq.worker.sandbox.pool_job import PoolJob
from taskq.worker.sandbox.supervision import EndReason

# Reads of a pipe once the child is gone: a process the job left behind
# (outside the child's group) may still be writing to it.
_READS_AFTER_EXIT = 64


class OutputPipes:
    """The output of one child's jobs, read as it comes."""

    def __init__(
        self, child: ChildProcess, loop: asyncio.AbstractEventLoop, *, marks: bool
    ) -> None:
        """Watch ``child``'s pipes; ``marks``: its jobs' starts may be marked in its output."""
        self._child = child
        self._loop = loop
        # A one-job child writes no marker: its output is all its job's.
        self._splitter = protocol.OutputSplitter(child.marker) if marks else None
        self._awaiting_marker: dict[int, PoolJob] = {}
        self._job: PoolJob | None = None  # whose output the pipe carries now
        loop.add_reader(child.output_fd, self.read)
        if child.stdout_fd is not None:
            loop.add_reader(child.stdout_fd, self._read_stdout)

    def may_hold_earlier_output(self) -> bool:
        """Whether the pipe may still hold output of a job before the next one (which is marked)."""
        return self._job is not None and not self._job.output_collected

    def job_sent(self, job: PoolJob) -> None:
        """``job`` went to the child: its output follows now, or once its marker comes."""
        if job.marked:
            self._awaiting_marker[job.seq] = job
        else:
            self._switch_to(job)

    def job_withdrawn(self, job: PoolJob) -> None:
        """``job`` never started: no marker of its will come."""
        self._awaiting_marker.pop(job.seq, None)

    def read(self) -> bool:
        """Read once from the output pipe; whether anything came."""
        data = self._read_from(self._child.output_fd)
        if not data:
            return False
        if self._splitter is None:
            self._take(data)
            return True
        for piece in self._splitter.feed(data):
            if isinstance(piece, int):
                self._switch_to(self._awaiting_marker.pop(piece, None))
            else:
                self._take(piece)
        return True

    def read_after_exit(self) -> None:
        """Read what the child wrote before it exited: the markers tell which jobs started."""
        # stdout first: of a command's lines written in turn, its log shows them so.
        for read in self._reads():
            for _ in range(_READS_AFTER_EXIT):
                if not read():
                    break

    def collect(self, job: PoolJob) -> None:
        """Collect what ``job`` wrote that the reader has not seen yet.

        A job's writes finished before its result was sent (or its child
        ended), so reading until the pipes are empty or the next job's marker
        comes collects all of it; the output cap bounds the read in case
        something keeps writing.
        """
        for read in self._reads():
            while (
                not job.output_closed
                and job.output.total_bytes <= job.limits.output_bytes
                and read()
            ):
                pass
        job.output_collected = True

    def stop_watching(self) -> None:
        self._loop.remove_reader(self._child.output_fd)
        if self._child.stdout_fd is not None:
            self._loop.remove_reader(self._child.stdout_fd)

    def _reads(self) -> tuple[Callable[[], bool], ...]:
        if self._child.stdout_fd is None:
            return (self.read,)
        return (self._read_stdout, self.read)

    def _read_stdout(self) -> bool:
        """Read once from an exec child's stdout, which is its command's result and its log."""
        assert self._child.stdout_fd is not None, "only an exec child's stdout has a pipe apart"
        data = self._read_from(self._child.stdout_fd)
        if not data:
            return False
        if self._job is not None and self._job.stdout is not None:
            self._job.stdout.feed(data)
        self._take(data)
        return True

    def _read_from(self, fd: int) -> bytes:
        """One read of ``fd``; ``b""`` when nothing is there (and when it has ended)."""
        try:
            data = os.read(fd, protocol.READ_CHUNK_BYTES)
        except BlockingIOError:
            return b""
        if not data:
            self._loop.remove_reader(fd)
        return data

    def _switch_to(self, job: PoolJob | None) -> None:
        """From here on the pipe carries ``job``'s output (``None``: nobody's)."""
        if self._job is not None:
            self._job.output_closed = True
        self._job = job
        if job is None or not job.marked:
            return
        job.seen_starting = True
        if job.withdrawing:
            # The child started it before the withdrawal reached it: stop it the hard way.
            job.end(EndReason.CANCELLED)

    def _take(self, data: bytes) -> None:
        job = self._job
        if job is None:
            return  # written before any job, by a thread a job left behind: nobody's output
        job.output.feed(data)
        if job.on_output is not None:
            job.on_output(data)
        if job.output.total_bytes > job.limits.output_bytes:
            job.end(EndReason.OUTPUT_LIMIT)
