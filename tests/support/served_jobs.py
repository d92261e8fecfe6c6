"""Jobs posted to a test's ``taskq serve`` (the integration tier's ``served``)."""

from __future__ import annotations

import uuid

import httpx


def posted_echo_job(api: httpx.Client, prefix: str) -> tuple[int, str]:
    """An echo job posted by ``api`` to a queue of its own (``prefix-<hex>``), which no
    worker serves: its id and its queue, for the test to claim and report by hand."""
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    body = {"target": "tests.support.jobs:echo", "queue": queue, "unchecked": True}
    answer = api.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"]), queue
