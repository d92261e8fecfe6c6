"""``help()`` of a client's request shows the request: its name, signature and doc.

Each request is declared once (:mod:`taskq.broker.client.operations`) as a
descriptor; read from the class, as ``help(taskq.Client.prune)`` and pydoc
read it, it must be the method of that client's kind, not "Help on Operation".
"""

from __future__ import annotations

import inspect
import pydoc

import taskq


def _help(thing: object) -> str:
    return pydoc.render_doc(thing, renderer=pydoc.plaintext)


def test_help_of_a_request_shows_its_own_signature_and_doc() -> None:
    shown = _help(taskq.Client.prune)
    assert "Operation" not in shown
    assert "prune(self, *, older_than: 'float | None' = None)" in shown
    assert "Delete jobs finished more than" in shown


def test_help_of_an_async_client_s_request_says_it_is_awaited() -> None:
    shown = _help(taskq.AsyncClient.get)
    assert "Operation" not in shown
    assert "async get(self, job_id: 'JobRef')" in shown
    assert inspect.iscoroutinefunction(taskq.AsyncClient.get)
    assert not inspect.iscoroutinefunction(taskq.Client.get)


def test_help_of_a_paged_request_shows_its_own_signature() -> None:
    shown = _help(taskq.Client.output)
    assert "Paged" not in shown
    assert "output(self, job_id: 'JobRef', *, attempt:" in shown
    assert "piece by piece" in shown


def test_help_of_the_client_lists_each_request_as_a_method() -> None:
    shown = _help(taskq.Client)
    assert "faces.Operation object" not in shown
    assert "faces.Paged object" not in shown
    assert "cancel(self, *job_ids: 'JobRef')" in shown
    assert "retention(self)" in shown
