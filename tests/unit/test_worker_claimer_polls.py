"""How soon an idle worker looks again: busy polling only where nothing wakes it for a new job."""

from __future__ import annotations

from pathlib import Path

from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import tells_of_changes
from taskq.worker.claimer import poll_interval

_IDLE = 0.4


def test_a_worker_that_only_polls_looks_sooner_just_after_a_claim() -> None:
    soon = poll_interval(_IDLE, since_claim=0.1, told_of_changes=False)
    later = poll_interval(_IDLE, since_claim=5.0, told_of_changes=False)
    assert soon < _IDLE
    assert later == _IDLE


def test_a_worker_told_of_new_jobs_does_not_busy_poll_after_a_claim() -> None:
    assert poll_interval(_IDLE, since_claim=0.1, told_of_changes=True) == _IDLE


def test_the_busy_poll_is_never_slower_than_the_idle_poll() -> None:
    assert poll_interval(0.001, since_claim=0.1, told_of_changes=False) == 0.001


def test_the_embedded_store_tells_of_changes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    try:
        assert tells_of_changes(store)
    finally:
        store.close()


def test_a_store_that_says_nothing_does_not_tell_of_changes() -> None:
    assert not tells_of_changes(object())
