"""``--json`` output written a field at a time reads as the whole document printed at once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from taskq.broker.records import JobState
from taskq.cli import output

_ITEMS: list[object] = [
    {"id": 1, "state": JobState.QUEUED, "spec": {"args": [1, "two\nlines"], "kwargs": {}}},
    {"id": 2, "name": "ünïcode", "empty": [], "nothing": None, "nested": {"a": {"b": [{}]}}},
    [3, 4.5, True],
    "a string",
]


@pytest.mark.parametrize("items", [_ITEMS, _ITEMS[:1], []], ids=["many", "one", "none"])
def test_a_streamed_field_prints_as_the_whole_document(
    items: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    head = {"id": 7, "counts": {"succeeded": 2}, "name": "tab\there"}
    edges = [{"parent_id": 1, "child_id": 2}]
    output.print_json({"workflow": head, "jobs": items, "edges": edges})
    whole = capsys.readouterr().out

    streamed: Iterator[object] = iter(items)
    output.print_json_fields({"workflow": head, "jobs": streamed, "edges": edges})
    assert capsys.readouterr().out == whole
    assert json.loads(whole)["jobs"] == json.loads(json.dumps(output.plain(items)))


def test_no_fields_print_an_empty_object(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_json({})
    whole = capsys.readouterr().out
    output.print_json_fields({})
    assert capsys.readouterr().out == whole == "{}\n"


def test_a_streamed_list_is_not_gathered_before_it_is_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    written_before: list[str] = []

    def items() -> Iterator[int]:
        for number in range(3):
            # What stdout holds when each item is asked for: the items before it.
            written_before.append(capsys.readouterr().out)
            yield number

    output.print_json_fields({"jobs": items()})
    assert written_before == ['{\n  "jobs": ', "[\n    0", ",\n    1"]
