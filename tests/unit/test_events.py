"""The worker's event lines, in both formats."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import subprocess
import sys
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


def test_in_an_event_loop_the_lines_of_one_pass_are_written_together() -> None:
    class CountingStream(io.StringIO):
        writes = 0

        def write(self, text: str) -> int:
            self.writes += 1
            return super().write(text)

    stream = CountingStream()
    log = EventLog(stream, format="text")

    async def one_pass() -> str:
        for job in range(5):
            log.emit("job_started", job=job)
        written_during_the_pass = stream.getvalue()
        await asyncio.sleep(0)
        return written_during_the_pass

    assert asyncio.run(one_pass()) == ""
    assert [line.split()[2] for line in stream.getvalue().splitlines()] == [
        f"job={job}" for job in range(5)
    ]
    assert stream.writes == 1


def test_lines_left_by_a_loop_that_ended_are_written_by_the_next_one_or_flush() -> None:
    stream = io.StringIO()
    log = EventLog(stream, format="text")

    async def emit_and_end(job: int) -> None:
        log.emit("job_started", job=job)

    loop = asyncio.new_event_loop()

    def emit_and_stop() -> None:
        log.emit("job_started", job=1)
        loop.stop()  # before the flush it scheduled can run

    loop.call_soon(emit_and_stop)
    loop.run_forever()
    loop.close()
    assert stream.getvalue() == ""
    asyncio.run(emit_and_end(2))
    assert [line.split()[2] for line in stream.getvalue().splitlines()] == ["job=1", "job=2"]
    log.emit("outside_a_loop", job=3)
    assert stream.getvalue().splitlines()[-1].endswith("job=3")


def test_the_worker_starts_its_first_child_before_asyncio_is_imported() -> None:
    # ``taskq-worker`` imports its main module, events included, before its
    # first pool child starts; asyncio comes with the rest, while that child starts.
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, taskq.worker.main; print('asyncio' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert imported.strip() == "False"


def test_taskqs_log_records_become_event_lines() -> None:
    stream = io.StringIO()
    events = EventLog(stream, format="json")
    handler = events.take_log_records()
    try:
        logging.getLogger("taskq.maintenance").warning("tick failed: %s", "no leader")
        logging.getLogger("taskq.worker").info("below the level: not written")
    finally:
        logging.getLogger("taskq").removeHandler(handler)
    [line] = [json.loads(each) for each in stream.getvalue().splitlines()]
    assert (line["event"], line["level"], line["logger"], line["message"]) == (
        "log",
        "warning",
        "taskq.maintenance",
        "tick failed: no leader",
    )
