"""What a Celery habit is called in taskq, said in the error of the name taskq lacks.

A newcomer from Celery types ``{name}.delay(path)``, ``{name}.s(path)`` or
``flow.apply_async()`` first; Python's own ``AttributeError`` would name the
attribute and stop there. The classes that meet those habits (a declared job,
a flow, a job's handle) define ``__getattr__`` outside type checking only, so
that a type checker still flags a misspelt attribute.
"""

from __future__ import annotations

from collections.abc import Mapping

DECLARED_JOB = {
    "delay": "{name}.submit(...) submits a call",
    "apply_async": "{name}.options(queue=..., run_at=...).submit(...) submits with options",
    "s": "{name}.step(...) is a call as a step of a workflow",
    "si": "{name}.step(...) is a call as a step of a workflow; its arguments are its own",
    "signature": "{name}.step(...) is a call as a step of a workflow",
    "chunks": "{name}.map(items) is one step per item; {name}.submit_many(calls) submits them",
    "starmap": "{name}.map(items) is one step per item; {name}.submit_many(calls) submits them",
}

FLOW = {
    "delay": "client.submit_workflow({name}) submits it, all of it in one write",
    "apply_async": "client.submit_workflow({name}) submits it, all of it in one write",
    "submit": "client.submit_workflow({name}) submits it, all of it in one write",
    "get": "client.submit_workflow({name}).result(timeout=...) waits for its last steps",
}

JOB_HANDLE = {
    "get": "{name}.result(timeout=...) waits for the job's result",
    "ready": "{name}.status().finished says whether it has ended",
    "revoke": "{name}.cancel() cancels it",
    "then": "later.options(after=[{name}]).submit(...) runs a job after it",
}

WORKFLOW_HANDLE = {
    "get": "{name}.result(timeout=...) waits for its last steps",
    "ready": "{name}.info().status says where it is",
    "revoke": "{name}.cancel() cancels what has not ended",
}

# `a | b` chains in Celery; here the chain is spelt out.
PIPE = "a flow is chained with .then(): a.then(b), not a | b"


def missing(owner: object, name: str, habits: Mapping[str, str], called: str) -> AttributeError:
    """The error for ``owner`` lacking ``name``: Python's words, then, for a habit, taskq's,
    with ``owner`` ``called`` as in the user's code (``resize``, ``flow``)."""
    said = f"{type(owner).__name__!r} object has no attribute {name!r}"
    habit = habits.get(name)
    if habit is not None:
        said += f" (a Celery habit? here {habit.format(name=called)})"
    # name and obj: Python's own "Did you mean" for a misspelt name still comes.
    return AttributeError(said, name=name, obj=owner)


def not_awaited(handle: object) -> TypeError:
    """The error for ``await handle``: not Celery's habit but async code's, met the same way.

    A blocking client's handle (``resize.submit(...)`` in a coroutine) points to
    ``taskq.AsyncClient``; an async one, awaited itself, to its ``result()``.
    """
    kind = type(handle).__name__
    flow = "Workflow" in kind
    if kind.startswith("Async"):
        whose = "the workflow's last steps" if flow else "the job"
        return TypeError(
            f"{kind} is not awaitable itself: await handle.result(timeout=...) waits for {whose}"
        )
    submit = "submit_workflow(flow)" if flow else "submit(job, ...)"
    return TypeError(
        f"{kind} is not awaitable: it is a blocking client's (taskq.Client, or a declared job's "
        f".submit()), whose calls block; in async code submit through a taskq.AsyncClient: "
        f"handle = await aclient.{submit}, then await handle.result(timeout=...)"
    )
