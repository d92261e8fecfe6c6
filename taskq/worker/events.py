"""One line per worker event, for people (text) or for log collectors (JSON)."""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from taskq import fast_json
from taskq.worker.settings import LOG_FORMATS

if TYPE_CHECKING:
    import asyncio


class EventLog:
    """Writes events such as ``job_started`` or ``lease_lost`` as single lines.

    Inside an event loop, the lines of one pass of the loop are written
    together by a callback of the next: a busy worker emits a few dozen per pass,
    and each write of its own cost a system call (and, in a worker, a hand-off
    of the GIL to its store thread). Outside a loop each line is written at once.
    """

    def __init__(self, stream: TextIO | None = None, *, format: str = "text") -> None:
        if format not in LOG_FORMATS:
            raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {format!r}")
        self.stream = stream or sys.stderr
        self.format = format
        self._stamped_second = -1
        self._stamp = ""
        self._pending: list[str] = []
        self._flush_due_in: asyncio.AbstractEventLoop | None = None

    def emit(self, event: str, **fields: Any) -> None:
        now = time.time()
        if self.format == "json":
            line = fast_json.dumps_text(
                {"ts": round(now, 3), "event": event, **fields}, default=str
            )
        else:
            details = " ".join(f"{key}={value}" for key, value in fields.items() if value != "")
            line = f"{self._local_time(now)} {event:<17} {details}"
        self._pending.append(line + "\n")
        loop = _running_loop()
        if loop is None:
            self.flush()
            return
        # Once per pass; again in a new loop, should one end before its flush ran.
        if self._flush_due_in is not loop:
            self._flush_due_in = loop
            loop.call_soon(self.flush)

    def take_log_records(self, logger_name: str = "taskq") -> logging.Handler:
        """Write the records of Python's ``logging`` under ``logger_name`` as ``log`` events,
        from WARNING up; the handler that does.

        Without it they went to stderr as bare text beside the event lines,
        breaking ``--log-format json`` for whoever collects them.
        """
        handler = _EventHandler(self)
        logging.getLogger(logger_name).addHandler(handler)
        return handler

    def flush(self) -> None:
        """Write the lines not written yet."""
        self._flush_due_in = None
        if self._pending:
            lines, self._pending = "".join(self._pending), []
            self.stream.write(lines)
            self.stream.flush()

    def _local_time(self, now: float) -> str:
        # A busy worker logs thousands of lines a second: format each second once.
        second = int(now)
        if second != self._stamped_second:
            self._stamped_second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(second))
        return self._stamp


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any.

    Found through ``sys.modules`` rather than an import: a worker's ``main``
    imports this module before its first pool child starts, and asyncio's
    import (20 ms on 2 cores) would hold that child back; no loop can run
    before asyncio is imported.
    """
    running = sys.modules.get("asyncio")
    if running is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = running.get_running_loop()
    except RuntimeError:
        return None
    return loop


class _EventHandler(logging.Handler):
    def __init__(self, events: EventLog) -> None:
        super().__init__(logging.WARNING)
        self._events = events

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._events.emit(
                "log",
                level=record.levelname.lower(),
                logger=record.name,
                message=record.getMessage(),
            )
        except Exception:
            self.handleError(record)
