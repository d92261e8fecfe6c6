"""The jobs filter line: parsed into a JobFilter and written back unchanged."""

from __future__ import annotations

import pytest

from taskq.app import filter_query
from taskq.app.source import JobFilter
from taskq.broker.records import JobState


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", JobFilter()),
        ("state:dead", JobFilter(state=JobState.DEAD)),
        ("queue:images resize", JobFilter(queue="images", text="resize")),
        (
            "worker:lab-01-7c2e91aa state:running",
            JobFilter(state=JobState.RUNNING, worker_id="lab-01-7c2e91aa"),
        ),
        ("'\"seed\":99'", JobFilter(text='"seed":99')),
        ('"in.png out"', JobFilter(text="in.png out")),
        ("http://host:80", JobFilter(text="http://host:80")),
        ("workflow:4 state:waiting", JobFilter(state=JobState.WAITING, workflow_id=4)),
    ],
)
def test_parse_and_render_round_trip(line: str, expected: JobFilter) -> None:
    parsed = filter_query.parse(line)
    assert parsed == expected
    assert filter_query.parse(filter_query.render(parsed)) == parsed


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("state:lost", "unknown state 'lost'"),
        ('"unclosed', "No closing quotation"),
        ("workflow:four", "workflow takes a workflow's id"),
        ("workflow:", "workflow takes a workflow's id"),
    ],
)
def test_a_bad_line_says_why(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        filter_query.parse(line)
