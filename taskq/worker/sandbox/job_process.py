"""The job process of a sandbox child: runs the jobs the worker sends (see ``child``).

Imported by the job process once it has split from its keeper (``keeper.split``),
while the keeper moves it into its control groups: what this imports is the
larger part of a child's start, and the move's wait for the kernel is hidden
behind it. ``taskq.testing`` runs jobs inline through :func:`run_job`.
"""

from __future__ import annotations

import collections
import errno
import inspect
import json
import os
import signal
import socket
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any, NoReturn

import msgspec

from taskq import job_context, retry
from taskq.broker.limits import Limits, parse_limits
from taskq.broker.records import ParentResult
from taskq.worker.sandbox import (
    call_targets,
    job_traceback,
    keeper,
    linux,
    module_imports,
    outcome,
    parents_file,
    protocol,
    rlimits,
)
from taskq.worker.sandbox.payloads import (
    CallPayload,
    Payload,
    ShellPayload,
)

_MAX_ERROR_MESSAGE_CHARS = 4_000
_MAX_TRACEBACK_CHARS = 32_000
# Built once rather than by json.dumps for every result.
_RESULT_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))

# Built before any limit applies: when a job has used up its memory, even
# describing that may fail, and this report needs no allocation to send.
_OUT_OF_MEMORY: dict[str, Any] = {
    "status": outcome.Status.MEMORY.value,
    "error": outcome.error_info("MemoryError", "out of memory; no room left to describe it"),
}
_OUT_OF_MEMORY_FRAME = protocol.encode_message({"type": "result", **_OUT_OF_MEMORY})


def serve_once(control: socket.socket, clock: keeper.JobClock) -> None:
    message = protocol.MessageReader(control).receive()
    if message is None:
        return
    request = protocol.JobRequest.from_message(message)
    # Measured here, not by reaping: a child's ru_maxrss starts from the
    # worker's own peak, which the kernel carries over into it.
    meter = rlimits.JobMeter()
    meter.start()
    rlimits.confine(request.limits)
    clock.job_started(request.limits)
    result = _run_job(request, control)
    usage = meter.finish()
    _send_result(
        control,
        {**result, "cpu_seconds": usage.cpu_seconds, "peak_rss_bytes": usage.peak_rss_bytes},
    )
    # Skip interpreter shutdown: atexit hooks or non-daemon threads the job left
    # must not hold the process (and the worker's slot) once the result is in.
    os._exit(0)


def serve_pool(
    control: socket.socket,
    clock: keeper.JobClock,
    ceiling: str,
    marker: str,
    modules: list[str],
    import_path: list[str],
    report_fd: int | None,
) -> None:
    # Processes a job leaves behind, even ones that call setsid, become this
    # process's children: a job that leaves one is then noticed (``children_left``).
    linux.become_subreaper()
    pool_limits = rlimits.PoolLimits(parse_limits(json.loads(ceiling)))
    meter = rlimits.JobMeter()
    jobs = _JobQueue(protocol.MessageReader(control))
    # Before ``ready``, under the hard limits: the first jobs find their modules
    # imported, and neither their wall clock nor their CPU counts the imports.
    sys.path[:] = import_path
    reports = module_imports.import_modules(modules)
    if report_fd is not None:
        with os.fdopen(report_fd, "wb") as report:
            report.write(module_imports.encode_report(reports))
    protocol.send_message(control, {"type": "ready", "cpu_seconds": rlimits.cpu_with_children()})
    fit = True
    while (job := jobs.next()) is not None:
        seq, request, marked = job
        # Its hard limits only go down: a job needing more goes to a fresh child, as the rest.
        fit = fit and pool_limits.allows(request.limits)
        if not fit or jobs.withdrawn(seq):
            protocol.send_message(control, {"type": "withdrawn", "seq": seq})
            continue
        if marked:
            # Straight to the pipe: everything the job before wrote is there already.
            os.write(sys.stdout.fileno(), protocol.output_marker(marker, seq))
        pool_limits.confine_job(request.limits, cpu_used=meter.start())
        clock.job_started(request.limits)
        result = _run_job(request, control)
        clock.job_ended()
        # Before the meter reads its counters: the zombies this reaps are the
        # job's, and nothing may reap between one job's finish and the next's start.
        children_left = rlimits.has_children()
        usage = meter.finish()
        _send_result(
            control,
            {
                **result,
                "seq": seq,
                "cpu_seconds": usage.cpu_seconds,
                "peak_rss_bytes": usage.peak_rss_bytes,
                "cpu_total_seconds": usage.cpu_total_seconds,
                "children_left": children_left,
            },
        )
        fit = not children_left and result["status"] != outcome.Status.MEMORY.value


class _JobQueue:
    """The jobs a pool child has been sent and not yet run, and those taken back."""

    def __init__(self, reader: protocol.MessageReader) -> None:
        self._reader = reader
        self._waiting: collections.deque[tuple[int, protocol.JobRequest, bool]] = (
            collections.deque()
        )
        self._withdrawn: set[int] = set()
        # Messages leave out what the one before said: read them in the order sent.
        self._last_request: protocol.JobRequest | None = None

    def next(self) -> tuple[int, protocol.JobRequest, bool] | None:
        """The next job to run (seq, request, marked); ``None`` once the socket closes."""
        while True:
            # A withdrawal sent after the job must be seen before the job starts.
            while (message := self._reader.receive_nowait()) is not None:
                self._add(message)
            if self._waiting:
                return self._waiting.popleft()
            message = self._reader.receive()
            if message is None:
                return None
            self._add(message)

    def withdrawn(self, seq: int) -> bool:
        """Whether job ``seq`` was taken back (asked once per job, as it comes up)."""
        if not self._withdrawn:
            return False
        found = seq in self._withdrawn
        # Withdrawals of jobs already run are late: forget them with this one.
        self._withdrawn = {later for later in self._withdrawn if later > seq}
        return found

    def _add(self, message: dict[str, Any]) -> None:
        if message.get("type") == "withdraw":
            self._withdrawn.add(protocol.parse_seq(message))
            return
        request = protocol.JobRequest.from_message(message, previous=self._last_request)
        self._last_request = request
        seq = protocol.parse_seq(message)
        self._waiting.append((seq, request, bool(message.get("mark", False))))


def exec_command(control: socket.socket, clock: keeper.JobClock) -> None:
    message = protocol.MessageReader(control).receive()
    if message is None:
        return
    request = protocol.JobRequest.from_message(message)
    command = request.payload
    if not isinstance(command, ShellPayload):
        raise protocol.ProtocolError(f"exec mode runs shell payloads, not {command.kind}")
    rlimits.confine(request.limits)
    clock.job_started(request.limits)
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored
    # across exec: give the command the defaults it expects (``yes | head``).
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    if command.cwd is not None:
        try:
            os.chdir(command.cwd)
        except OSError as exc:
            _cannot_exec(control, exc, f"cannot run in the directory {command.cwd!r}")
    try:
        os.execvpe(command.argv[0], command.argv, {**os.environ, **command.env})
    except OSError as exc:
        _cannot_exec(control, exc, f"cannot run {command.argv[0]!r}")


# What may pass: a machine short of memory or processes for a moment, a program
# being rewritten. A missing or unreadable directory or program will not
# appear by waiting for a retry on this worker's machine.
_TRANSIENT_EXEC_ERRORS = frozenset({errno.ENOMEM, errno.EAGAIN, errno.ETXTBSY})


def _cannot_exec(control: socket.socket, exc: OSError, what: str) -> NoReturn:
    """Report that the command could not start (not retried unless it may pass), and exit."""
    failure = {
        "status": outcome.Status.ERROR.value,
        "error": outcome.error_info(type(exc).__qualname__, f"{what}: {exc.strerror or exc}"),
    }
    if exc.errno not in _TRANSIENT_EXEC_ERRORS:
        failure["give_up"] = "permanent"
    _send_result(control, failure)
    os._exit(127)


def _run_job(request: protocol.JobRequest, control: socket.socket) -> dict[str, Any]:
    """Run the request's payload; return the body of its ``result`` message."""
    sys.path[:] = request.import_path
    return run_job(
        request,
        lambda update: protocol.send_message(control, protocol.progress_message(update)),
    )


def run_job(
    request: protocol.JobRequest, send: Callable[[job_context.JobUpdate], None]
) -> dict[str, Any]:
    """Run a ``call`` or ``python_exec`` request here; the body of its ``result`` message.

    The job's progress and checkpoints go to ``send``. The sandbox child runs
    each job this way, and ``taskq.testing`` runs jobs inline by it.
    """
    job = request.job
    context = job_context.JobContext(
        id=job.id,
        attempt=job.attempt,
        queue=job.queue,
        max_attempts=job.max_attempts,
        checkpoint_json=job.checkpoint_json,
        send=send,
        parent_count=job.parent_count,
        parents=_parents_reader(job),
    )
    job_context.enter(context)
    try:
        body = _call(request.payload, request.limits, request.modules, context)
        if context.spawned is not None and body["status"] == outcome.Status.SUCCEEDED.value:
            # Written only with the success it came with.
            body["spawn"] = msgspec.to_builtins(context.spawned)
            if context.spawned_by_name:
                body["spawn_by_name"] = msgspec.to_builtins(context.spawned_by_name)
        return body
    except MemoryError:
        return _OUT_OF_MEMORY
    finally:
        # Under the context's lock: no update from a thread the job left follows its result.
        context.close()
        job_context.enter(None)


def _parents_reader(job: protocol.JobIdentity) -> Callable[[], Iterator[ParentResult]] | None:
    """How the job reads its parents' outcomes: from its request, or from the worker's file."""
    if job.parents is not None:
        return partial(iter, job.parents)
    if job.parents_file is not None:
        return partial(parents_file.read, job.parents_file)
    return None


def _call(
    payload: Payload, limits: Limits, modules: list[str], context: job_context.JobContext
) -> dict[str, Any]:
    if isinstance(payload, ShellPayload):
        raise protocol.ProtocolError("shell payloads run in exec mode")
    try:
        function = call_targets.resolve(payload)
        if isinstance(payload, CallPayload):
            refusal = call_targets.foreign_function(payload.target, function, modules)
            if refusal:
                return {
                    "status": outcome.Status.POLICY.value,
                    "error": outcome.error_info("PolicyRefused", f"{refusal}; nothing was run"),
                }
    except MemoryError:
        raise
    except BaseException as exc:
        # It would fail the same way on every attempt: one is enough.
        return _failure(exc, give_up="permanent")
    try:
        try:
            value = function(*payload.args, **payload.kwargs)
        except TypeError:
            # Told apart only once the call failed: nothing is spent on calls that fit.
            misfit = call_targets.misfit(function, payload)
            if misfit is None:
                raise
            return _failure(misfit, give_up="permanent")
        if inspect.isawaitable(value):
            value = _run_to_end(value)
        return _encode_result(value, limits.result_bytes)
    except MemoryError as exc:
        # The traceback's frames hold the job's locals, and so its memory: free
        # them to make room for describing the failure.
        traceback.clear_frames(exc.__traceback__)
        error = _describe(exc)
        if not error["message"]:
            # MemoryError usually says nothing; say which limit the job ran into.
            error["message"] = (
                f"out of memory: the job may use {limits.memory_bytes / 2**20:g} MiB "
                "of address space"
            )
        return {"status": outcome.Status.MEMORY.value, "error": error}
    except retry.Retry as exc:
        verdict = _failure(exc)
        if exc.after is not None:
            verdict["retry_after"] = exc.after
        return verdict
    except retry.Abort as exc:
        return _failure(exc, give_up="abort")
    except BaseException as exc:
        # SystemExit and KeyboardInterrupt raised by a job are its failures; they
        # must not end a pool child that has more jobs to run. A flow its code
        # built or spawned that was refused would be refused on every attempt: one
        # is enough, as for a spawn the worker refuses by name (spawn_names.refused).
        return _failure(exc, give_up="permanent" if context.refused(exc) else "")


def _failure(exc: BaseException, *, give_up: str = "") -> dict[str, Any]:
    """The result body of a job that raised ``exc``, with its classes for the retry policy."""
    body: dict[str, Any] = {
        "status": outcome.Status.ERROR.value,
        "error": _describe(exc),
        "lineage": list(retry.exception_lineage(type(exc))),
    }
    if give_up:
        body["give_up"] = give_up
    return body


def _run_to_end(awaitable: Awaitable[object]) -> object:
    """An async job's value: run on an event loop of its own until it is done."""
    # Imported here, by the few children that run async jobs: asyncio is a third
    # of a child's start-up, and a worker's first jobs wait for its children.
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # No loop here, as in a child: the job runs below, outside this handler,
        # or its exceptions would carry this RuntimeError as their context.
        pass
    else:
        # Called on a running loop (taskq.testing in an async test; never in a child):
        # asyncio.run refuses to nest, so the job's loop runs in a thread.
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="taskq-job") as pool:
            return pool.submit(asyncio.run, _awaited(awaitable)).result()
    return asyncio.run(_awaited(awaitable))


async def _awaited(awaitable: Awaitable[object]) -> object:
    # asyncio.run takes a coroutine; a job may return any awaitable (a Future, a Task).
    return await awaitable


def _encode_result(value: object, result_bytes: int) -> dict[str, Any]:
    try:
        # ASCII (json's default), so its length in characters is its size in bytes.
        encoded = _RESULT_ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return {
            "status": outcome.Status.RESULT_INVALID.value,
            "error": outcome.error_info(
                type(exc).__qualname__, f"the return value is not JSON-serialisable: {exc}"
            ),
        }
    if len(encoded) > result_bytes:
        return {
            "status": outcome.Status.RESULT_INVALID.value,
            "error": outcome.error_info(
                "ResultTooLarge",
                f"the return value is {len(encoded)} bytes of JSON, over the limit of "
                f"{result_bytes}",
            ),
        }
    # Sent as text and stored as it is: the worker checks it, and never encodes it again.
    return {"status": outcome.Status.SUCCEEDED.value, "result_json": encoded}


def _describe(exc: BaseException) -> outcome.ErrorInfo:
    cls = type(exc)
    class_name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    try:
        message = str(exc)
    except Exception:
        message = f"<str() of the {class_name} failed>"
    text = job_traceback.format_job_traceback(exc)
    # The end of a traceback (the failing line and the exception) matters most.
    return outcome.error_info(
        class_name, message[:_MAX_ERROR_MESSAGE_CHARS], text[-_MAX_TRACEBACK_CHARS:]
    )


def _send_result(control: socket.socket, body: dict[str, Any]) -> None:
    try:
        frame = protocol.encode_message({"type": "result", **body})
    except MemoryError:
        frame = _OUT_OF_MEMORY_FRAME
    control.sendall(frame)
