"""The jobs filter as one line of text: ``state:dead queue:images worker:ID workflow:4 text``.

Typing a filter is faster than stepping through dropdowns, and the line
reads back exactly what the table shows.
"""

from __future__ import annotations

import shlex

from taskq.app.source import JobFilter
from taskq.broker.records import JobState

_STATES = ", ".join(state.value for state in JobState)


def parse(line: str) -> JobFilter:
    """The filter a line asks for; raises ValueError saying what is wrong with it."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"filter: {exc}") from exc
    state: JobState | None = None
    queue = worker_id = None
    workflow_id: int | None = None
    text: list[str] = []
    for word in words:
        prefix, colon, value = word.partition(":")
        if colon and prefix == "state":
            try:
                state = JobState(value)
            except ValueError as exc:
                raise ValueError(f"filter: unknown state {value!r}; one of {_STATES}") from exc
        elif colon and prefix == "queue" and value:
            queue = value
        elif colon and prefix == "worker" and value:
            worker_id = value
        elif colon and prefix == "workflow":
            workflow_id = _workflow_id(value)
        else:
            text.append(word)
    return JobFilter(
        state=state,
        queue=queue,
        worker_id=worker_id,
        text=" ".join(text) or None,
        workflow_id=workflow_id,
    )


def _workflow_id(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) < 2**63:
        raise ValueError(f"filter: workflow takes a workflow's id, e.g. workflow:4, not {value!r}")
    return int(value)


def render(job_filter: JobFilter) -> str:
    """The line that :func:`parse` turns back into ``job_filter``."""
    words = []
    if job_filter.state is not None:
        words.append(f"state:{job_filter.state.value}")
    if job_filter.queue is not None:
        words.append(f"queue:{job_filter.queue}")
    if job_filter.worker_id is not None:
        words.append(f"worker:{job_filter.worker_id}")
    if job_filter.workflow_id is not None:
        words.append(f"workflow:{job_filter.workflow_id}")
    if job_filter.text:
        words.append(job_filter.text)
    return shlex.join(words)
