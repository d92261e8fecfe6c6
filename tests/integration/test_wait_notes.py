"""A Python client's wait says, a few seconds in and once, why its job has not started:
no active worker serves its queue (and how to start one), on the ``taskq.waits`` logger,
which Python prints on stderr where the program set up no logging. On both stores and
over HTTP; for a workflow's queued jobs too; never from a client told not to (taskq
serve's own, whose waits are its callers')."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import pytest

import taskq
from taskq import errors
from taskq.broker.ops import job_waits
from taskq.dev.server import ServerProcess, token_of

# The note comes at once here: the waits below run out a second in.
pytestmark = pytest.mark.usefixtures("note_at_once")
TARGET = "tests.support.workflow_jobs:square"
WAIT_SECONDS = 1.0


@pytest.fixture
def note_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_waits, "NOTE_AFTER_SECONDS", 0.05)


@pytest.fixture
def notes(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The notes the waits have said so far."""
    caplog.set_level(logging.WARNING, logger="taskq.waits")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "taskq.waits"]


def _waited_out(wait: Callable[..., object]) -> None:
    """``wait`` (a handle's ``result`` or ``wait``) runs out, its job never started."""
    with pytest.raises(errors.ResultTimeout):
        wait(timeout=WAIT_SECONDS)


def _queue() -> str:
    return f"notes-{uuid.uuid4().hex[:8]}"


def _no_worker_serves(queue: str) -> str:
    return f"no active worker serves queue {queue!r} (start one: taskq-worker --queues {queue}"


def test_a_wait_for_a_job_no_worker_serves_says_so_once(
    url: str, notes: Callable[[], list[str]]
) -> None:
    queue = _queue()
    with taskq.Client(url) as client:
        handle = client.submit(TARGET, 3, queue=queue, unchecked=True)
        _waited_out(handle.result)
    [note] = notes()
    assert note.startswith(f"taskq: job {handle.id} is still queued: "), note
    assert _no_worker_serves(queue) in note, note


def test_a_wait_for_a_workflow_names_its_queued_job(
    url: str, notes: Callable[[], list[str]]
) -> None:
    queue = _queue()
    with taskq.Client(url) as client:
        flow = taskq.step(TARGET, 2, queue=queue, unchecked=True).then(
            taskq.step(TARGET, queue=queue, unchecked=True)
        )
        handle = client.submit_workflow(flow, name="notes")
        _waited_out(handle.wait)
    [note] = notes()
    first = handle.job_ids[0]
    assert note.startswith(f"taskq: job {first} of workflow {handle.id} is still queued: "), note
    assert _no_worker_serves(queue) in note, note


def test_a_client_told_not_to_says_nothing(url: str, notes: Callable[[], list[str]]) -> None:
    with taskq.Client(url, wait_notes=False) as client:
        handle = client.submit(TARGET, 3, queue=_queue(), unchecked=True)
        _waited_out(handle.result)
    assert notes() == []


def test_a_wait_too_short_to_need_it_says_nothing(
    url: str, notes: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_waits, "NOTE_AFTER_SECONDS", WAIT_SECONDS)
    with taskq.Client(url) as client:
        handle = client.submit(TARGET, 3, queue=_queue(), unchecked=True)
        _waited_out(handle.result)
    assert notes() == []


def test_a_wait_over_http_says_so_too(
    served: tuple[str, ServerProcess], notes: Callable[[], list[str]]
) -> None:
    queue = _queue()
    with taskq.Client(served[1].url, token=token_of("tester")) as client:
        handle = client.submit(TARGET, 3, queue=queue, unchecked=True)
        _waited_out(handle.result)
        flow = taskq.step(TARGET, 2, queue=queue, unchecked=True)
        pipeline = client.submit_workflow(flow, name="notes")
        _waited_out(pipeline.wait)
    job_note, workflow_note = notes()
    assert job_note.startswith(f"taskq: job {handle.id} is still queued: "), job_note
    assert f"of workflow {pipeline.id} is still queued: " in workflow_note, workflow_note
    assert _no_worker_serves(queue) in job_note, job_note
