"""A worker's store outage is told once, whichever of its loops meets it, and its end once."""

from __future__ import annotations

import io
import json

from taskq import errors
from taskq.worker.events import EventLog
from taskq.worker.store_outage import StoreOutage


def _events(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_outage_is_told_once_and_again_only_when_its_cause_changes_kind() -> None:
    stream = io.StringIO()
    outage = StoreOutage(EventLog(stream, format="json"), "w-1")
    outage.written()  # no outage: nothing to tell
    for _ in range(50):  # claims, heartbeats and reports, each failing
        outage.failed(errors.StoreFull("SQLite store /x.db: database or disk is full"))
    outage.failed(errors.StoreCorrupt("SQLite store /x.db: database disk image is malformed"))
    outage.failed(errors.StoreCorrupt("SQLite store /x.db: database disk image is malformed"))
    outage.written()
    outage.written()
    told = _events(stream)
    assert [(event["event"], event.get("kind")) for event in told] == [
        ("store_unavailable", "StoreFull"),
        ("store_unavailable", "StoreCorrupt"),
        ("store_recovered", None),
    ]
    assert told[0]["error"] == "SQLite store /x.db: database or disk is full"
    assert told[2]["failures"] == 52


def test_a_new_outage_after_recovery_is_told_again() -> None:
    stream = io.StringIO()
    outage = StoreOutage(EventLog(stream, format="json"), "w-1")
    for _ in range(2):
        outage.failed(errors.StoreUnavailable("rqlite cluster rqlite://a:4001: no leader"))
        outage.written()
    assert [event["event"] for event in _events(stream)] == [
        "store_unavailable",
        "store_recovered",
        "store_unavailable",
        "store_recovered",
    ]
