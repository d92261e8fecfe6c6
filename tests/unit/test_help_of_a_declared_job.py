"""``help(resize)`` of a declared job shows the job: its call, how it is used, its doc.

pydoc shows an object by its ``__doc__``; a job whose function has no
docstring was shown as the class ``DeclaredJob``, its constructor's
``(function, options, client)`` passing for the job's signature.
"""

from __future__ import annotations

import pydoc

import taskq
from tests.support.declared_jobs import fail_with
from tests.support.workflow_jobs import square


def _help(thing: object) -> str:
    return pydoc.render_doc(thing, renderer=pydoc.plaintext)


def test_help_of_a_job_without_a_docstring_shows_its_own_call() -> None:
    assert square.function.__doc__ is None
    shown = _help(square)
    assert "square(x: 'int') -> 'int'" in shown
    assert "square.submit(...) queues a call for a worker" in shown
    assert "function: 'Callable" not in shown


def test_help_of_a_job_keeps_its_function_s_doc_after_its_call() -> None:
    shown = _help(fail_with.options(queue="elsewhere"))
    assert "fail_with(kind: 'str') -> 'None'" in shown
    own = fail_with.function.__doc__
    assert own is not None
    assert own.strip().splitlines()[0] in shown


def test_the_class_keeps_its_own_docstring() -> None:
    assert taskq.DeclaredJob.__doc__ is not None
    assert taskq.DeclaredJob.__doc__.startswith("A function declared a job")
