"""Declared jobs in a store of each kind, for tests that stand in for workers by their writes.

A worker is its two writes (publishing its declarations, registering), so
each test says exactly which worker declares what. Names and queues are
unique per test: the rqlite cluster is shared.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import taskq
from taskq.broker.ops import plan
from taskq.broker.ops.functions import Declaration, Parameter, function_publish
from taskq.broker.ops.workers import worker_register


@pytest.fixture
def client(url: str) -> Iterator[taskq.Client]:
    """A client of the store at ``url`` that reads declarations afresh on every submit."""
    with taskq.Client(url, submitter="declared-tests") as opened:
        # Each check reads the store afresh: the cache is the acceptance tier's to show.
        opened.declarations.seconds = 0.0
        yield opened


def names() -> tuple[str, str]:
    """A job name and a queue of the calling test's own."""
    tag = uuid.uuid4().hex[:8]
    return f"tests.declared_{tag}:count_words", f"texts-{tag}"


def declaration(name: str, **options: object) -> Declaration:
    """``name(path: str, *, lower: bool = True)``, declared with ``options``."""
    return Declaration(
        name=name,
        parameters=(
            Parameter("path", "POSITIONAL_OR_KEYWORD", annotation="str"),
            Parameter("lower", "KEYWORD_ONLY", default="True", annotation="bool"),
        ),
        options=dict(options),
        doc="Count the words of a file.",
    )


def serving(client: taskq.Client, name: str, queues: list[str], *declared: Declaration) -> str:
    """A registered worker called ``name`` that serves ``declared``; its id."""
    worker_id = f"{name}-{uuid.uuid4().hex[:8]}"
    plan.run(client.store, function_publish(worker_id, declared))
    plan.run(
        client.store,
        worker_register(worker_id, name=name, host="h", pid=1, queues=queues, labels=(), slots=1),
    )
    return worker_id


def declared(client: taskq.Client, **options: object) -> tuple[str, str, str]:
    """A name of the calling test's own that one live worker declares with ``options`` (and
    its queue), that queue, and the name misspelt, which no worker declares."""
    name, queue = names()
    serving(client, "w1", [queue], declaration(name, queue=queue, **options))
    return name, queue, name.replace("count_words", "count_word")
