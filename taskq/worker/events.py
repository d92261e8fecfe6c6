"""One line per worker event, for people (text) or for log collectors (JSON)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

FORMATS = ("text", "json")

# Two events a job: one encoder for every line, since building one per line
# costs about as much as the encoding itself.
_JSON_LINE = json.JSONEncoder(default=str)


class EventLog:
    """Writes events such as ``job_started`` or ``lease_lost`` as single lines."""

    def __init__(self, stream: TextIO | None = None, *, format: str = "text") -> None:
        if format not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.stream = stream or sys.stderr
        self.format = format
        self._stamped_second = -1
        self._stamp = ""

    def emit(self, event: str, **fields: Any) -> None:
        now = time.time()
        if self.format == "json":
            line = _JSON_LINE.encode({"ts": round(now, 3), "event": event, **fields})
        else:
            details = " ".join(f"{key}={value}" for key, value in fields.items() if value != "")
            line = f"{self._local_time(now)} {event:<17} {details}"
        self.stream.write(line + "\n")
        self.stream.flush()

    def _local_time(self, now: float) -> str:
        # A busy worker logs thousands of lines a second: format each second once.
        second = int(now)
        if second != self._stamped_second:
            self._stamped_second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(second))
        return self._stamp
