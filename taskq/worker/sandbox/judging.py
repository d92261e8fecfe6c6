"""Judging how a job ended: what the supervisor saw, made an ``Outcome``; no processes.

Precedence: a kill by the worker (timeout, cancellation, output cap, broken
protocol) or by the child's keeper (lease, CPU time) names the outcome,
because whatever the child did next was caused by the kill. Otherwise the
child's own report wins. A child that died without a report is judged by
how it died:

- SIGXCPU is the soft CPU limit; SIGKILL with the CPU limit used up is the
  hard one (``cpu``).
- Memory is a heuristic. Hitting RLIMIT_AS in Python raises MemoryError,
  which the child reports itself. Code outside Python (C extensions, the
  interpreter's own start-up) may instead crash when an allocation fails
  (SIGSEGV, SIGBUS, SIGABRT), and the kernel's OOM killer sends SIGKILL. So
  such a death counts as ``memory`` when the peak RSS reached
  ``NEAR_MEMORY_LIMIT`` of the limit, else as ``crashed``. It misses a crash
  caused by one large failed allocation made while RSS was still low, and it
  blames memory for a genuine segfault in a job that was also using most of
  its memory.
- Any other signal, or an exit without a report, is ``crashed``; for a
  ``shell`` command, which never reports, exit status 0 is success and any
  other is ``error``. A command's result is ``{"exit_code": 0, "stdout":
  ..., "stdout_truncated": ...}``: the end of its stdout, as much as a
  result may hold (its stderr goes only to the log tail).
"""

from __future__ import annotations

import json
import math
import re
import signal
from typing import Any

import msgspec

from taskq.broker.limits import Limits
from taskq.worker.sandbox.child_process import Ended
from taskq.worker.sandbox.outcome import ErrorInfo, Outcome, Status, error_info
from taskq.worker.sandbox.payloads import Kind
from taskq.worker.sandbox.protocol import ChildReport
from taskq.worker.sandbox.supervision import EndReason, Supervised

NEAR_MEMORY_LIMIT = 0.75

_ALLOCATION_FAILURE_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT}
# Where a JSON number may be past a float's range (about 1.8e308): an
# exponent of three digits, or a run of more than 308 digits.
_MAY_OVERFLOW = re.compile(r"[eE][+-]?\d{3}|\d{309}")


def decide_outcome(supervised: Supervised, *, kind: Kind, limits: Limits) -> Outcome:
    """The outcome of a job, from what watching it saw and the limits it ran under."""
    status, error = _status(supervised, kind, limits)
    report = supervised.report
    reported_success = report is not None and status is Status.SUCCEEDED
    result_json = report.result_json if report is not None and reported_success else None
    if kind == "shell" and status is Status.SUCCEEDED:
        result_json = command_result_json(
            supervised.stdout or "", supervised.stdout_truncated, limits.result_bytes
        )
    peak_rss_bytes, cpu_seconds = _usage(supervised)
    ended = supervised.ended
    return Outcome(
        status=status,
        result_json=result_json,
        error=error,
        exit_code=ended.exit_code if ended else None,
        signal=ended.signal if ended else None,
        peak_rss_bytes=peak_rss_bytes,
        cpu_seconds=cpu_seconds,
        wall_seconds=supervised.wall_seconds,
        log_tail=supervised.log_tail,
        spawn=report.spawn if report is not None and reported_success else None,
        spawn_by_name=report.spawn_by_name if report is not None and reported_success else (),
        # The job's own word on retrying counts only where its report decided the status.
        **(_retry_verdict(report) if report is not None and status is report.status else {}),
    )


def _retry_verdict(report: ChildReport) -> dict[str, Any]:
    return {
        "lineage": report.lineage,
        "retry_after": report.retry_after,
        "give_up": report.give_up,
    }


def _status(supervised: Supervised, kind: Kind, limits: Limits) -> tuple[Status, ErrorInfo | None]:
    reason = supervised.reason
    if reason is EndReason.TIMEOUT:
        return Status.TIMEOUT, error_info(
            "Timeout", f"still running after {limits.wall_seconds:g} s of wall-clock time; killed"
        )
    if reason is EndReason.CANCELLED:
        return Status.CANCELLED, error_info(
            "Cancelled", "stopped by the worker (cancelled, drained or handed back); killed"
        )
    if reason is EndReason.LEASE_EXPIRED:
        return Status.LEASE_EXPIRED, error_info(
            "LeaseExpired",
            "its lease could not be renewed in time (worker frozen or cut off from the store); "
            "killed before another worker could claim it",
        )
    if reason is EndReason.CPU_LIMIT:
        return Status.CPU, _cpu_limit_error(limits)
    if reason is EndReason.OUTPUT_LIMIT or supervised.output_bytes > limits.output_bytes:
        return Status.OUTPUT_LIMIT, error_info(
            "OutputLimit", f"wrote more than {limits.output_bytes} bytes of output; killed"
        )
    if supervised.protocol_error:
        return Status.CRASHED, error_info(
            "ProtocolError", f"the child broke the control protocol: {supervised.protocol_error}"
        )
    if supervised.report is not None:
        return _reported(supervised.report, limits)
    assert supervised.ended is not None, "only a child that reported lives on"
    return _judge_death(supervised.ended, _job_cpu_seconds(supervised), kind, limits)


def command_result_json(stdout: str, truncated: bool, result_bytes: int) -> str:
    """A successful command's result as JSON within ``result_bytes``, cutting stdout's start."""
    while True:
        # ASCII (json's default), so its length in characters is its size in bytes.
        text = json.dumps({"exit_code": 0, "stdout": stdout, "stdout_truncated": truncated})
        excess = len(text) - result_bytes
        if excess <= 0 or not stdout:
            return text
        # Keep the share of the characters that would fit were their bytes spread
        # evenly (an escape takes up to 12); the next round tells whether they do.
        keep = min(len(stdout) - 1, len(stdout) * result_bytes // len(text))
        stdout, truncated = stdout[len(stdout) - keep :], True


def _reported(report: ChildReport, limits: Limits) -> tuple[Status, ErrorInfo | None]:
    """What the child reported; a result it could not have encoded itself is refused.

    The child's encoder writes only JSON within the limit; a job that wrote
    its own frame to the control socket may have sent anything, and the text
    goes to the store as it is.
    """
    text = report.result_json
    if report.status is not Status.SUCCEEDED or text is None:
        return report.status, report.error
    if len(text) > limits.result_bytes:
        return Status.RESULT_INVALID, error_info(
            "ResultInvalid", f"the result is {len(text)} bytes of JSON, over {limits.result_bytes}"
        )
    problem = _not_json(text)
    if problem:
        return Status.RESULT_INVALID, error_info("ResultInvalid", f"the result {problem}")
    return report.status, report.error


def _not_json(text: str) -> str:
    """Why ``text`` is not JSON every reader takes (``""``: it is).

    Checked without building the value where that can tell: msgspec reads
    the syntax and refuses NaN and the infinities. A number that may be too
    large for a float, and a lone surrogate (an escape such as ``\\ud800``,
    which msgspec refuses and the store's readers take), are read by
    ``json``, refusing what would come out NaN or infinite.
    """
    try:
        msgspec.json.decode(text, type=msgspec.Raw)
        if not _MAY_OVERFLOW.search(text):
            return ""
    except msgspec.DecodeError:
        pass
    try:
        json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except ValueError as exc:
        return f"is not JSON: {exc}"
    return ""


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:32]} is too large for a float")
    return value


def _judge_death(
    ended: Ended, cpu_seconds: float, kind: Kind, limits: Limits
) -> tuple[Status, ErrorInfo | None]:
    if ended.signal == signal.SIGXCPU or (
        ended.signal == signal.SIGKILL and cpu_seconds >= limits.cpu_seconds
    ):
        return Status.CPU, _cpu_limit_error(limits)
    if (
        ended.signal in _ALLOCATION_FAILURE_SIGNALS
        and ended.peak_rss_bytes >= NEAR_MEMORY_LIMIT * limits.memory_bytes
    ):
        return Status.MEMORY, error_info(
            "MemoryLimit",
            f"killed by {_signal_name(ended.signal)} with peak RSS {ended.peak_rss_bytes} bytes, "
            f"near the limit of {limits.memory_bytes}",
        )
    if ended.signal is not None:
        return Status.CRASHED, error_info("Signal", f"killed by {_signal_name(ended.signal)}")
    if kind == "shell":
        if ended.exit_code == 0:
            return Status.SUCCEEDED, None
        return Status.ERROR, error_info(
            "ExitStatus", f"the command exited with status {ended.exit_code}"
        )
    return Status.CRASHED, error_info(
        "ExitStatus", f"the child exited with status {ended.exit_code} without reporting a result"
    )


def _cpu_limit_error(limits: Limits) -> ErrorInfo:
    return error_info("CpuLimit", f"killed at its limit of {limits.cpu_seconds} s of CPU time")


def _usage(supervised: Supervised) -> tuple[int, float]:
    """Peak RSS and CPU seconds of the job: measured by a pool child, else by reaping."""
    report = supervised.report
    if report is not None and report.peak_rss_bytes is not None and report.cpu_seconds is not None:
        return report.peak_rss_bytes, report.cpu_seconds
    if supervised.ended is None:
        return 0, 0.0  # A pool child's report without figures: nothing was measured.
    # A pool child that died mid-job leaves only lifetime figures: its CPU time
    # can be made per-job, its peak RSS stays an upper bound.
    return supervised.ended.peak_rss_bytes, _job_cpu_seconds(supervised)


def _job_cpu_seconds(supervised: Supervised) -> float:
    if supervised.ended is None:
        return 0.0
    return supervised.ended.cpu_seconds - (supervised.cpu_seconds_at_start or 0.0)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
