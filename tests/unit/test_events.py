"""The worker's event lines, in both formats."""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from taskq.worker.events import EventLog


def test_json_lines_carry_the_event_and_its_fields() -> None:
    stream = io.StringIO()
    log = EventLog(stream, format="json")
    before = time.time()
    log.emit("job_finished", job=7, status="succeeded", seconds=0.25, error="")
    log.emit("lease_lost", job=8, when=object())
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "job_finished"
    assert (first["job"], first["status"], first["seconds"], first["error"]) == (
        7,
        "succeeded",
        0.25,
        "",
    )
    assert before - 0.001 <= first["ts"] <= time.time() + 0.001
    assert second["when"].startswith("<object object")  # anything else is written as text


def test_text_lines_leave_out_empty_fields_and_stamp_local_time() -> None:
    stream = io.StringIO()
    log = EventLog(stream, format="text")
    log.emit("job_started", job=7, queue="images", stopped="")
    log.emit("job_finished", job=7, status="succeeded")
    lines = stream.getvalue().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
    assert re.fullmatch(rf"{stamp} job_started       job=7 queue=images", lines[0])
    assert re.fullmatch(rf"{stamp} job_finished      job=7 status=succeeded", lines[1])


def test_the_stamp_follows_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    log = EventLog(stream, format="text")
    clock = iter([1_000_000_000.2, 1_000_000_000.9, 1_000_000_001.1])
    monkeypatch.setattr(time, "time", lambda: next(clock))
    for _ in range(3):
        log.emit("tick")
    stamps = [line.split()[0] for line in stream.getvalue().splitlines()]
    expected = [
        time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(second))
        for second in (1_000_000_000, 1_000_000_000, 1_000_000_001)
    ]
    assert stamps == expected


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        EventLog(io.StringIO(), format="yaml")
