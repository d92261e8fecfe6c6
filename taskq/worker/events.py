"""One line per worker event, for people (text) or for log collectors (JSON)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

FORMATS = ("text", "json")


class EventLog:
    """Writes events such as ``job_started`` or ``lease_lost`` as single lines."""

    def __init__(self, stream: TextIO | None = None, *, format: str = "text") -> None:
        if format not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.stream = stream or sys.stderr
        self.format = format

    def emit(self, event: str, **fields: Any) -> None:
        now = time.time()
        if self.format == "json":
            line = json.dumps({"ts": round(now, 3), "event": event, **fields}, default=str)
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
            details = " ".join(f"{key}={value}" for key, value in fields.items() if value != "")
            line = f"{stamp} {event:<17} {details}"
        print(line, file=self.stream, flush=True)
