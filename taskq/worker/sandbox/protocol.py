"""The control channel between the worker and a child: length-prefixed JSON messages.

Each message is a 4-byte big-endian length and that many bytes of UTF-8 JSON
holding an object with a ``type``. The channel is a Unix socket pair kept
apart from the job's stdout and stderr, so nothing a job prints can be
mistaken for its result.

Parent to child: ``job``. Child to parent: ``progress`` and ``result``,
and from a pool child first of all ``ready``, with the CPU time its start
took, so the worker can tell a job's CPU from its child's lifetime total.
The parent reads with ``MessageDecoder``, which bounds message size because
the child runs code the worker does not trust; the child reads with
``MessageReader`` and writes with the blocking helpers.

A pool child may be sent jobs while one is still running: it queues them
and runs them in order, so short jobs do not each wait for a round trip.
Each job message then carries a ``seq``, and its ``result`` the same one.
The parent can take back a queued job with ``withdraw``; the child answers
``withdrawn`` in its place (as it does for every queued job once it has
stopped taking jobs). The job's output shares one pipe with the jobs before
it, so a job sent with ``mark`` is announced there by ``output_marker``
when it starts, which tells the parent where one job's output ends and the
next one's begins (``OutputSplitter``), and whether a job it wanted back
had started.
"""

from __future__ import annotations

import functools
import json
import re
import socket
import struct
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar, cast

import msgspec

from taskq import errors, fast_json
from taskq.broker import limits
from taskq.broker.limits import Limits
from taskq.broker.records import ParentResult, WorkflowSubmission
from taskq.job_context import MAX_CHECKPOINT_BYTES, MAX_SPAWN_BYTES, JobUpdate, NamedStep
from taskq.worker.sandbox import outcome, payloads, spawn_message

_T = TypeVar("_T")
_LENGTH = struct.Struct(">I")
READ_CHUNK_BYTES = 64 * 1024
"""How much to read from a child's socket or pipe at a time."""
# Room in a result message for the error and usage figures beside the result.
_RESULT_OVERHEAD_BYTES = 256 * 1024
# A result travels as JSON text inside the message: escaping its quotes and
# backslashes at most doubles it (the child writes it in ASCII).
_RESULT_ESCAPED_FACTOR = 2


class ProtocolError(errors.TaskqError):
    """A message on the control channel is malformed or too large."""


def encode_message(message: Mapping[str, object]) -> bytes:
    """One framed message, ready to send."""
    body = fast_json.dumps(message)
    return _LENGTH.pack(len(body)) + body


class MessageDecoder:
    """Cuts a byte stream into messages, refusing any longer than ``max_message_bytes``."""

    def __init__(self, max_message_bytes: int) -> None:
        self._max_message_bytes = max_message_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add received bytes; return every message they complete."""
        self._buffer += data
        messages = []
        while len(self._buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._buffer)
            if length > self._max_message_bytes:
                raise ProtocolError(
                    f"message of {length} bytes exceeds the {self._max_message_bytes}-byte bound"
                )
            end = _LENGTH.size + length
            if len(self._buffer) < end:
                break
            messages.append(_decode(bytes(self._buffer[_LENGTH.size : end])))
            del self._buffer[:end]
        return messages


def decoder_for_results(result_bytes: int) -> MessageDecoder:
    """A decoder for a child's messages, bounded by the largest result it may send.

    A result may carry the jobs its job spawned, as JSON (not escaped text).
    """
    return MessageDecoder(
        _RESULT_ESCAPED_FACTOR * result_bytes + MAX_SPAWN_BYTES + _RESULT_OVERHEAD_BYTES
    )


class JobIdentity(msgspec.Struct, frozen=True):
    """Which job a request runs, for ``taskq.current_job()`` in the child."""

    id: int = 0
    attempt: int = 1
    queue: str = "default"
    max_attempts: int = 1
    checkpoint_json: str | None = None
    """What an earlier attempt saved, for this one to resume from."""
    parent_count: int = 0
    """How many parents the job has (jobs of its workflow it ran after)."""
    parents_file: str | None = None
    """Where the worker wrote how they ended (see ``parents_file``)."""
    parents: tuple[ParentResult, ...] | None = None
    """How they ended, when all of them came with the claim: sent with the request, no file."""


class JobRequest(msgspec.Struct, frozen=True):
    """The ``job`` message: what to run, within which limits, importing from where.

    ``import_path`` is the worker's ``sys.path``, so a child imports job code
    from exactly where the worker would, whatever directory it started in;
    ``modules`` are the worker's modules, which the function a ``call``
    resolves to must come from. A pool child's jobs nearly all share these
    and their limits, so a message leaves out what is the same as in the one
    before it.
    """

    payload: payloads.Payload
    limits: limits.Limits
    import_path: list[str]
    modules: list[str]
    job: JobIdentity = msgspec.field(default_factory=JobIdentity)
    asked: Limits | None = None
    """The limits the job asked for, where ``limits`` lowers any to the worker's most:
    for the worker to tell of (``taskq.worker.lowered_limits``); never sent to a child."""

    def to_message(self, previous: JobRequest | None = None) -> dict[str, object]:
        """The request as a message for a child that was last sent ``previous``."""
        message: dict[str, object] = {
            "type": "job",
            "payload": payloads.payload_to_dict(self.payload),
            "job": msgspec.to_builtins(self.job),
        }
        if previous is None or previous.limits != self.limits:
            message["limits"] = self.limits.to_dict()
        if previous is None or previous.import_path != self.import_path:
            message["import_path"] = self.import_path
        if previous is None or previous.modules != self.modules:
            message["modules"] = self.modules
        return message

    @classmethod
    def from_message(
        cls, message: Mapping[str, Any], previous: JobRequest | None = None
    ) -> JobRequest:
        """Read a ``job`` message (in the child, from the trusted parent) after ``previous``."""
        if message.get("type") != "job":
            raise ProtocolError(f"expected a job message, got {message.get('type')!r}")
        limits_before = None if previous is None else previous.limits
        import_path_before = None if previous is None else previous.import_path
        modules_before = None if previous is None else previous.modules
        return cls(
            payloads.parse_payload(message["payload"]),
            _carried_over(message, "limits", limits_before, _parse_limits),
            _carried_over(message, "import_path", import_path_before, list),
            _carried_over(message, "modules", modules_before, list),
            msgspec.convert(message.get("job", {}), JobIdentity),
        )


def _carried_over(
    message: Mapping[str, Any], key: str, earlier: _T | None, parse: Callable[[Any], _T]
) -> _T:
    """``message[key]`` parsed, or else what the previous job message said."""
    if key in message:
        return parse(message[key])
    if earlier is None:
        raise ProtocolError(f"a child's first job message must carry its {key}")
    return earlier


def _parse_limits(message: Mapping[str, Any]) -> limits.Limits:
    # A pool child's jobs nearly all share their limits: parse each set once.
    try:
        return _parse_limits_once(tuple(sorted(message.items())))
    except TypeError:  # a value that cannot be hashed: parsing it will say what is wrong
        return limits.parse_limits(message)


@functools.lru_cache(maxsize=32)
def _parse_limits_once(items: tuple[tuple[str, Any], ...]) -> limits.Limits:
    return limits.parse_limits(dict(items))


class ChildReport(msgspec.Struct, frozen=True):
    """A ``result`` message: how the payload ended, as the child saw it.

    ``result_json`` is the return value as the child encoded it, passed on
    to the store unchanged (``judging`` checks it is JSON the store takes).
    The usage figures come from pool children, which measure each job
    themselves; a one-job child is measured by its reaping.
    """

    status: outcome.Status
    result_json: str | None = None
    error: outcome.ErrorInfo | None = None
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None
    cpu_total_seconds: float | None = None
    """The pool child's CPU over its life so far: the next job's starting point."""
    children_left: bool = False
    """The job left a process of its own running in the pool child."""
    lineage: tuple[str, ...] = ()
    """An exception's class and bases by name, for the job's ``retry_on``."""
    retry_after: float | None = None
    """The job raised ``taskq.Retry(after=...)``: the wait it asked for."""
    give_up: str = ""
    """``abort``: the job raised ``taskq.Abort``; ``permanent``: it cannot run as asked
    (its function does not import, or the call does not fit it)."""
    spawn: WorkflowSubmission | None = None
    """The jobs a job that succeeded spawned into its workflow (``current_job().spawn``)."""
    spawn_by_name: tuple[NamedStep, ...] = ()
    """Which of them it gave by name, for the worker to resolve (``spawn_message``)."""


_REPORTABLE = {
    outcome.Status.SUCCEEDED,
    outcome.Status.ERROR,
    outcome.Status.MEMORY,
    outcome.Status.RESULT_INVALID,
    outcome.Status.POLICY,
}


def parse_report(message: Mapping[str, Any]) -> ChildReport:
    """Check a ``result`` message: a child runs job code, so a malformed one must be caught."""
    status = message.get("status")
    if status not in _REPORTABLE:
        raise ProtocolError(f"result has an impossible status {status!r}")
    error = message.get("error")
    if error is not None and not (
        isinstance(error, dict)
        and set(error) == {"type", "message", "traceback"}
        and all(isinstance(value, str) for value in error.values())
    ):
        raise ProtocolError("result has a malformed error")
    result_json = message.get("result_json")
    if result_json is not None and not isinstance(result_json, str):
        raise ProtocolError("result has a result_json that is not text")
    cpu_seconds = message.get("cpu_seconds")
    cpu_total_seconds = message.get("cpu_total_seconds")
    peak_rss_bytes = message.get("peak_rss_bytes")
    whole_peak = isinstance(peak_rss_bytes, int) and not isinstance(peak_rss_bytes, bool)
    if (
        not all(value is None or _is_number(value) for value in (cpu_seconds, cpu_total_seconds))
        or not (peak_rss_bytes is None or whole_peak)
        or not isinstance(message.get("children_left", False), bool)
    ):
        raise ProtocolError("result has malformed usage figures")
    lineage = message.get("lineage", [])
    retry_after = message.get("retry_after")
    give_up = message.get("give_up", "")
    if (
        not isinstance(lineage, list)
        or not all(isinstance(name, str) for name in lineage)
        or not (retry_after is None or (_is_number(retry_after) and 0 <= retry_after < 1e9))
        or give_up not in _GIVE_UPS
    ):
        raise ProtocolError("result has a malformed retry verdict")
    return ChildReport(
        outcome.Status(status),
        result_json,
        cast(outcome.ErrorInfo | None, error),
        cpu_seconds,
        peak_rss_bytes,
        cpu_total_seconds,
        message.get("children_left", False),
        tuple(lineage),
        None if retry_after is None else float(retry_after),
        give_up,
        *_spawn(message, status),
    )


def _spawn(
    message: Mapping[str, Any], status: object
) -> tuple[WorkflowSubmission | None, tuple[NamedStep, ...]]:
    try:
        return spawn_message.parse_spawn(message, status == outcome.Status.SUCCEEDED)
    except spawn_message.MalformedSpawn as exc:
        raise ProtocolError(str(exc)) from exc


_GIVE_UPS = {"", "abort", "permanent"}


def parse_ready(message: Mapping[str, Any]) -> float:
    """The CPU seconds a pool child used to start, from its ``ready`` message."""
    cpu_seconds = message.get("cpu_seconds")
    if not _is_number(cpu_seconds):
        raise ProtocolError("ready message has no cpu_seconds")
    return float(cpu_seconds)


def parse_progress(message: Mapping[str, Any]) -> JobUpdate:
    """Check a ``progress`` message."""
    fraction = message.get("fraction")
    text = message.get("message")
    checkpoint = message.get("checkpoint")
    if not _is_number(fraction) or not 0.0 <= fraction <= 1.0 or not isinstance(text, str):
        raise ProtocolError("malformed progress message")
    if checkpoint is not None and not (
        isinstance(checkpoint, str) and len(checkpoint) <= MAX_CHECKPOINT_BYTES
    ):
        raise ProtocolError("malformed checkpoint in a progress message")
    return JobUpdate(float(fraction), text, checkpoint)


def progress_message(update: JobUpdate) -> dict[str, object]:
    """The ``progress`` message a child sends for ``update`` (its checkpoint, if any, too)."""
    message: dict[str, object] = {
        "type": "progress",
        "fraction": update.fraction,
        "message": update.message,
    }
    if update.checkpoint_json is not None:
        message["checkpoint"] = update.checkpoint_json
    return message


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_seq(message: Mapping[str, Any]) -> int:
    """The ``seq`` of a pool child's ``job``, ``withdraw``, ``result`` or ``withdrawn`` message."""
    seq = message.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ProtocolError(f"{message.get('type')!r} message has no valid seq")
    return seq


# The record separator cannot be typed and rarely appears in text, and the
# token (random, one per child) makes a marker a job writes by chance unlikely.
_MARKER_EDGE = b"\x1e"
_MARKER_TAIL = re.compile(rb"(\d{1,19})\x1e")
_MARKER_TAIL_BYTES = 20


def output_marker(token: str, seq: int) -> bytes:
    """What a pool child writes to its output when job ``seq``, sent with ``mark``, starts."""
    return b"%staskq-job %s %d%s" % (_MARKER_EDGE, token.encode(), seq, _MARKER_EDGE)


class OutputSplitter:
    """Finds a pool child's job markers in its output stream, wherever reads cut it.

    ``feed`` returns the stream as pieces in order: ``bytes`` of output, and
    ``int`` for a marker, the ``seq`` of the job whose output follows. The
    end of a read that might be the start of a marker is held back until the
    next read says what it is.
    """

    def __init__(self, token: str) -> None:
        self._prefix = b"%staskq-job %s " % (_MARKER_EDGE, token.encode())
        self._held = b""

    def feed(self, data: bytes) -> list[bytes | int]:
        if self._held:
            data, self._held = self._held + data, b""
        elif _MARKER_EDGE not in data:
            return [data]
        pieces: list[bytes | int] = []
        start = 0
        while (found := data.find(self._prefix, start)) >= 0:
            tail = _MARKER_TAIL.match(data, found + len(self._prefix))
            if tail is None:
                if len(data) - found - len(self._prefix) < _MARKER_TAIL_BYTES:
                    break  # the marker's number may go on in the next read
                found += 1  # not a marker after all: output
                pieces.append(data[start:found])
                start = found
                continue
            if found > start:
                pieces.append(data[start:found])
            pieces.append(int(tail.group(1)))
            start = tail.end()
        else:
            # Hold back an ending that could be the first bytes of a marker.
            edge = data.rfind(_MARKER_EDGE, max(start, len(data) - len(self._prefix)))
            if edge >= 0 and self._prefix.startswith(data[edge:]):
                self._held = data[edge:]
                data = data[:edge]
            if len(data) > start:
                pieces.append(data[start:])
            return pieces
        self._held = data[found:]
        if found > start:
            pieces.append(data[start:found])
        return pieces


def send_message(sock: socket.socket, message: Mapping[str, object]) -> None:
    """Send one message, blocking until it is all written."""
    sock.sendall(encode_message(message))


class MessageReader:
    """Blocking reads of whole messages, a buffer at a time (a child reads this way).

    One ``recv`` usually brings a whole message; bytes past it wait in the
    buffer for the next call.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def receive(self) -> dict[str, Any] | None:
        """Block for the next message; ``None`` when the other side closed the channel."""
        header = self._take(_LENGTH.size)
        if header is None:
            return None
        (length,) = _LENGTH.unpack(header)
        body = self._take(length)
        if body is None:
            raise ProtocolError("the channel closed in the middle of a message")
        return _decode(body)

    def receive_nowait(self) -> dict[str, Any] | None:
        """The next message if it has arrived whole, else ``None``; never blocks."""
        while True:
            if len(self._buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(self._buffer)
                end = _LENGTH.size + length
                if len(self._buffer) >= end:
                    body = bytes(self._buffer[_LENGTH.size : end])
                    del self._buffer[:end]
                    return _decode(body)
            try:
                chunk = self._sock.recv(READ_CHUNK_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            if not chunk:
                return None  # closed: the next ``receive`` says so
            self._buffer += chunk

    def _take(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            chunk = self._sock.recv(max(size - len(self._buffer), READ_CHUNK_BYTES))
            if not chunk:
                if self._buffer:
                    raise ProtocolError("the channel closed in the middle of a message")
                return None
            self._buffer += chunk
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = fast_json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("message is not an object with a string 'type'")
    return message
